package dledger

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The profiles' settings and derived bounds are the numbers docs/protocol.md 6.1 and 6.2 give
// for them: each row below is computed from the profile (through the same methods the elector,
// the detector and the server use), compared with the number this test expects, and with the
// document's cell in that profile's column. A new profile, setting or bound that changes a
// number changes the document in the same commit, or this test fails.

// profileRow is one row of 6.1 or 6.2: the start of its first cell, how the profile's value
// is written there, and the value expected per profile.
type profileRow struct {
	section, row string
	got          func(Config) string
	want         map[string]string
}

// docDur writes a duration as 6.2 does: ms below a second, else seconds, without trailing
// zeros ("37.5 ms", "1.075 s", "6 s").
func docDur(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// docSpan writes a range: one unit when both ends share it ("260-600 ms", "4-6 s"), else each
// end with its own ("400 ms-1.2 s").
func docSpan(lo, hi time.Duration) string {
	switch {
	case hi < time.Second:
		return strings.TrimSuffix(docDur(lo), " ms") + "-" + docDur(hi)
	case lo >= time.Second:
		return strings.TrimSuffix(docDur(lo), " s") + "-" + docDur(hi)
	}
	return docDur(lo) + "-" + docDur(hi)
}

// docSpanS writes a back-off range in seconds, as 6.2 does ("0.7-0.9 s").
func docSpanS(lo, hi time.Duration) string {
	f := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	return f(lo) + "-" + f(hi) + " s"
}

func docMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }

func docPair(a, b time.Duration) string {
	return fmt.Sprintf("%d, %d ms", a.Milliseconds(), b.Milliseconds())
}

var profileRows = []profileRow{
	{"6.1", "`heartBeatTimeIntervalMs`", func(c Config) string { return docMs(c.HeartBeatInterval) },
		map[string]string{"lan": "200 ms", "dledger": "2000 ms", "fast": "75 ms"}},
	{"6.1", "`maxHeartBeatLeak`", func(c Config) string { return strconv.Itoa(c.MaxHeartBeatLeak) },
		map[string]string{"lan": "3", "dledger": "3", "fast": "8"}},
	{"6.1", "`minVoteIntervalMs`", func(c Config) string { return docPair(c.MinVoteInterval, c.MaxVoteInterval) },
		map[string]string{"lan": "100, 300 ms", "dledger": "300, 1000 ms", "fast": "100, 300 ms"}},
	{"6.1", "`voteRoundBase`", func(c Config) string { return docMs(c.VoteRoundBase) },
		map[string]string{"lan": "300 ms", "dledger": "2000 ms", "fast": "300 ms"}},
	{"6.1", "`minTakeLeadershipVoteIntervalMs`", func(c Config) string {
		return docPair(c.MinTakeLeadershipVoteInterval, c.MaxTakeLeadershipVoteInterval)
	}, map[string]string{"lan": "30, 100 ms", "dledger": "30, 100 ms", "fast": "30, 100 ms"}},
	{"6.1", "`maxLeadershipTransferWaitIndex`", func(c Config) string { return strconv.FormatInt(c.MaxLeadershipTransferWaitIndex, 10) },
		map[string]string{"lan": "1000", "dledger": "1000", "fast": "1000"}},
	{"6.1", "`leadershipTransferWaitTimeout`", func(c Config) string { return docMs(c.LeadershipTransferWaitTimeout) },
		map[string]string{"lan": "1000 ms", "dledger": "1000 ms", "fast": "1000 ms"}},
	{"6.1", "`preferredLeaderIds`", func(c Config) string {
		if len(c.PreferredLeaderIDs) == 0 {
			return "none"
		}
		return strings.Join(c.PreferredLeaderIDs, ";")
	}, map[string]string{"lan": "none", "dledger": "none", "fast": "none"}},
	{"6.1", "`maintainInterval`", func(c Config) string { return docMs(c.MaintainInterval) },
		map[string]string{"lan": "10 ms", "dledger": "10 ms", "fast": "10 ms"}},

	{"6.2", "detection window DW", func(c Config) string { return docDur(c.DetectionWindow()) },
		map[string]string{"lan": "600 ms", "dledger": "6 s", "fast": "600 ms"}},
	{"6.2", "longest vote round", func(c Config) string { return docDur(c.MaxVoteRound()) },
		map[string]string{"lan": "600 ms", "dledger": "3 s", "fast": "600 ms"}},
	{"6.2", "transferee's campaign budget", func(c Config) string { return docDur(c.takeBudget()) },
		map[string]string{"lan": "1.2 s", "dledger": "6 s", "fast": "1.2 s"}},
	{"6.2", "`TransferBound`", func(c Config) string { return docDur(c.TransferBound()) },
		map[string]string{"lan": "2.8 s", "dledger": "10 s", "fast": "2.8 s"}},
	{"6.2", "back-off after `REJECT_ALREADY_HAS_LEADER`", func(c Config) string {
		return docSpanS(c.MinVoteInterval+c.DetectionWindow(), c.MaxVoteInterval+c.DetectionWindow())
	}, map[string]string{"lan": "0.7-0.9 s", "dledger": "6.3-7 s", "fast": "0.7-0.9 s"}},
	{"6.2", "detection margin `M`", func(c Config) string { return docDur(c.DetectorBounds().Margin) },
		map[string]string{"lan": "60 ms", "dledger": "60 ms", "fast": "60 ms"}},
	{"6.2", "check-quorum margin `M_q`", func(c Config) string { return docDur(c.DetectorBounds().QuorumMargin) },
		map[string]string{"lan": "100 ms", "dledger": "1 s", "fast": "100 ms"}},
	{"6.2", "adapted windows", func(c Config) string {
		b := c.DetectorBounds()
		return docSpan(b.Interval+b.Margin, b.Ceiling) + "; " + docSpan(b.Interval+2*b.QuorumMargin, max(b.Ceiling, b.QuorumCeiling))
	}, map[string]string{"lan": "260-600 ms; 400 ms-1.2 s", "dledger": "2.06-6 s; 4-6 s", "fast": "135-600 ms; 275 ms-1.075 s"}},
	{"6.2", "back-off when too many voters", func(c Config) string {
		return docSpanS(c.MinVoteInterval+c.MaxVoteInterval, 2*c.MaxVoteInterval)
	}, map[string]string{"lan": "0.4-0.6 s", "dledger": "1.3-2 s", "fast": "0.4-0.6 s"}},
	{"6.2", "stall threshold", func(c Config) string { return docDur(c.StallThreshold()) },
		map[string]string{"lan": "100 ms", "dledger": "1 s", "fast": "37.5 ms"}},
	// The call timeout the detector's check-quorum ceiling assumes (server/config_test.go ties
	// it to the server's own).
	{"6.2", "rpc call timeout for votes", func(c Config) string {
		b := c.DetectorBounds()
		return docDur(b.QuorumCeiling - b.Interval)
	}, map[string]string{"lan": "1 s", "dledger": "4 s", "fast": "1 s"}},
	{"6.2", "rpc call timeout for a transfer", func(c Config) string { return docDur(c.TransferBound() + time.Second) },
		map[string]string{"lan": "3.8 s", "dledger": "11 s", "fast": "3.8 s"}},
}

// docColumns reads the table of a section of docs/protocol.md: for each row, its first
// cell and its cell in each profile's column (the header's `name`).
func docColumns(t *testing.T, doc, section string) map[string]map[string]string {
	t.Helper()
	at := strings.Index(doc, "\n### "+section+" ")
	if at < 0 {
		t.Fatalf("docs/protocol.md has no section %s", section)
	}
	var header []string
	rows := map[string]map[string]string{}
	for _, line := range strings.Split(doc[at+1:], "\n")[1:] {
		if strings.HasPrefix(line, "### ") || (header != nil && !strings.HasPrefix(line, "|")) {
			break
		}
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		r := map[string]string{}
		for i, h := range header {
			if i < len(cells) && strings.HasPrefix(h, "`") {
				r[strings.Trim(h, "`")] = cells[i]
			}
		}
		rows[cells[0]] = r
	}
	return rows
}

// profileMismatches lists every row where profile cfg (named name) differs from the test's
// expectation or from the document's cell (doc maps a section to its table).
func profileMismatches(name string, cfg Config, doc map[string]map[string]map[string]string) []string {
	var bad []string
	for _, r := range profileRows {
		got := r.got(cfg)
		if want, ok := r.want[name]; !ok {
			bad = append(bad, fmt.Sprintf("%s %s: no expected value for profile %s", r.section, r.row, name))
		} else if got != want {
			bad = append(bad, fmt.Sprintf("%s %s: profile %s has %q, want %q", r.section, r.row, name, got, want))
		}
		var cells []string
		for first, cols := range doc[r.section] {
			if strings.HasPrefix(first, r.row) {
				cells = append(cells, cols[name])
			}
		}
		if len(cells) != 1 {
			bad = append(bad, fmt.Sprintf("%s %s: %d rows of the document start so, want 1", r.section, r.row, len(cells)))
		} else if cells[0] != got {
			bad = append(bad, fmt.Sprintf("%s %s: the document says %q for profile %s, the code gives %q", r.section, r.row, cells[0], name, got))
		}
	}
	return bad
}

func readProtocolTables(t *testing.T) map[string]map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]map[string]map[string]string{"6.1": docColumns(t, string(b), "6.1"), "6.2": docColumns(t, string(b), "6.2")}
}

func TestProfilesMatchTheProtocolDoc(t *testing.T) {
	doc := readProtocolTables(t)
	for _, name := range Profiles() {
		cfg, err := Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range profileMismatches(name, cfg, doc) {
			t.Error(m)
		}
	}
	// The check can fail: a changed setting, a changed bound's rule, a changed cell.
	fast := FastConfig()
	fast.HeartBeatInterval = 80 * time.Millisecond
	if len(profileMismatches(ProfileFast, fast, doc)) == 0 {
		t.Error("a fast profile with an 80 ms heartbeat matches the document")
	}
	fast = FastConfig()
	fast.MaintainInterval = 5 * time.Millisecond // DetectionMargin and QuorumMargin move with it
	if bad := profileMismatches(ProfileFast, fast, doc); len(bad) < 2 {
		t.Errorf("a 5 ms maintain interval is %d mismatches, want the setting and its bounds: %v", len(bad), bad)
	}
	doc["6.2"]["stall threshold: how late a due pass may run before it counts as a stall of the member's own process (6.3, 7.8)"]["fast"] = "100 ms"
	if len(profileMismatches(ProfileFast, FastConfig(), doc)) != 1 {
		t.Error("a changed cell of the document's fast column is not one mismatch")
	}
}

// The fast profile: lan with a 75 ms heartbeat and leak 8, its detection window lan's, and
// valid, alone and under overrides; a name that is not a profile is refused with the list.
func TestFastProfile(t *testing.T) {
	fast, err := Profile(ProfileFast)
	if err != nil {
		t.Fatal(err)
	}
	lan := DefaultConfig()
	want := lan
	want.HeartBeatInterval, want.MaxHeartBeatLeak = 75*time.Millisecond, 8
	if fmt.Sprintf("%#v", fast) != fmt.Sprintf("%#v", want) {
		t.Fatalf("fast is %+v, want lan with a 75 ms heartbeat and leak 8", fast)
	}
	if err := fast.Validate(); err != nil {
		t.Fatal(err)
	}
	// Everything sized by round trips or by the detection window is lan's; only the
	// follower-side floor (interval + M) moves, to 135 ms, under the 150 ms target.
	if fast.DetectionWindow() != lan.DetectionWindow() || fast.MaxVoteRound() != lan.MaxVoteRound() ||
		fast.TransferBound() != lan.TransferBound() ||
		fast.DetectorBounds().QuorumCeiling-fast.HeartBeatInterval != lan.DetectorBounds().QuorumCeiling-lan.HeartBeatInterval ||
		fast.QuorumMargin() != lan.QuorumMargin() {
		t.Fatalf("fast's bounds differ from lan's: %+v vs %+v", fast.DetectorBounds(), lan.DetectorBounds())
	}
	if floor := fast.HeartBeatInterval + fast.DetectionMargin(); floor != 135*time.Millisecond {
		t.Fatalf("fast's follower timeout floor is %v, want 135 ms", floor)
	}
	// The bounds counted in intervals (docs/protocol.md 6.1, "Why the fast numbers").
	if fast.ChangeBound() != 750*time.Millisecond || fast.LedgerFreshness() != 150*time.Millisecond ||
		fast.QuietRefresh() != lan.QuietRefresh() {
		t.Fatalf("fast: change bound %v, ledger freshness %v, quiet refresh %v; want 750 ms, 150 ms, lan's",
			fast.ChangeBound(), fast.LedgerFreshness(), fast.QuietRefresh())
	}
	// An override over fast keeps the rest of fast (WithDefaults), and the rules still apply.
	c := Config{LeadershipTransferWaitTimeout: 2 * time.Second}.WithDefaults(fast)
	if c.HeartBeatInterval != 75*time.Millisecond || c.MaxHeartBeatLeak != 8 || c.Validate() != nil {
		t.Fatalf("an override over fast: %+v, %v", c, c.Validate())
	}
	c = Config{HeartBeatInterval: 5 * time.Millisecond}.WithDefaults(fast)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "maintainInterval 10ms must not exceed heartBeatTimeInterval 5ms") {
		t.Fatalf("a 5 ms heartbeat over fast: %v, want the maintain interval rule", err)
	}
	for _, bad := range []string{"Fast", "wan", "lan,fast"} {
		_, err := Profile(bad)
		if err == nil || !strings.Contains(err.Error(), `(known: lan, dledger, fast)`) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("Profile(%q): %v, want an error naming it and the known profiles", bad, err)
		}
	}
}
