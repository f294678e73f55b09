package calm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

var errNoAnswer = errors.New("no answer")

func st(self, role string, term int64, leader string) adminclient.StatusJSON {
	return adminclient.StatusJSON{SelfID: self, Role: role, Term: term, LeaderID: leader}
}

// calmSteps feeds a tracker one report (or a forget, or a poll error) per millisecond.
type calmStep struct {
	idx    int
	st     adminclient.StatusJSON
	forget bool
	err    bool
}

func feed(tr *calmTracker, t0 time.Time, steps []calmStep) time.Time {
	at := t0
	for _, s := range steps {
		at = at.Add(time.Millisecond)
		switch {
		case s.forget:
			tr.forget(s.idx, at)
		case s.err:
			tr.observe(harness.Observation{Idx: s.idx, At: at, Err: errNoAnswer})
		default:
			tr.observe(harness.Observation{Idx: s.idx, At: at, St: s.st})
		}
	}
	return at
}

// TestCalmTrackerCalmRun: a follower stopped, resumed and probing at the same term, with its
// reports missing meanwhile, is no leader change, no term step and no leaderless time; the
// first reports of a run, arriving one by one, are no loss of the leader either.
func TestCalmTrackerCalmRun(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := newCalmTracker(3, harness.Leader{ID: "n0", Term: 3}, t0)
	tr.markFaulted("n1")
	end := feed(tr, t0, []calmStep{
		{idx: 0, st: st("n0", "LEADER", 3, "n0")}, // alone: not yet a quorum, and not a loss
		{idx: 1, st: st("n1", "FOLLOWER", 3, "n0")},
		{idx: 2, st: st("n2", "FOLLOWER", 3, "n0")},
		{idx: 1, forget: true}, // SIGSTOP
		{idx: 0, st: st("n0", "LEADER", 3, "n0")},
		{idx: 2, err: true}, // one poll of n2 failed: leader alone, the quorum is lost
		{idx: 2, st: st("n2", "FOLLOWER", 3, "n0")},
		{idx: 1, st: st("n1", "CANDIDATE", 3, "")}, // resumed, probes at the same term
		{idx: 1, st: st("n1", "FOLLOWER", 3, "n0")},
	})
	c := tr.result(end)
	// The longest silence of a member never faulted: n0, answering at +1 and +5 ms (n2's
	// silence from +3 to +7 ms, through its failed poll, is as long, not longer).
	want := calmCounts{termRaisers: map[string]int64{}, leaderless: time.Millisecond,
		maxLeaderless: time.Millisecond, maxTerm: 3,
		stall: stall{d: 4 * time.Millisecond, member: "n0", end: t0.Add(5 * time.Millisecond)}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	if k, ok := tr.whole(3); !ok || k != (harness.Leader{ID: "n0", Term: 3}) {
		t.Fatalf("whole = %v %v, want n0@3", k, ok)
	}
}

// TestCalmTrackerDisruption: a faulted follower that raises the term and a group that then
// elects another leader: one term step by the faulted member, one leader change, the
// leaderless time from the first lost quorum to the new agreement, and a later re-election of
// the same member at a higher term counts as a change too (its followers lost it meanwhile).
func TestCalmTrackerDisruption(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := newCalmTracker(3, harness.Leader{ID: "n0", Term: 3}, t0)
	tr.markFaulted("n1")
	end := feed(tr, t0, []calmStep{
		{idx: 0, st: st("n0", "LEADER", 3, "n0")},
		{idx: 1, st: st("n1", "FOLLOWER", 3, "n0")},
		{idx: 2, st: st("n2", "FOLLOWER", 3, "n0")}, // t0+3ms
		{idx: 1, st: st("n1", "CANDIDATE", 4, "")},  // the faulted member raises the term
		{idx: 2, st: st("n2", "FOLLOWER", 4, "")},   // t0+5ms: quorum lost (n0 alone)
		{idx: 1, st: st("n1", "LEADER", 4, "n1")},
		{idx: 2, st: st("n2", "FOLLOWER", 4, "n1")}, // t0+7ms: new agreed leader n1@4
		{idx: 0, st: st("n0", "FOLLOWER", 4, "n1")},
		{idx: 2, st: st("n2", "CANDIDATE", 5, "")}, // an unfaulted member raises it next
		{idx: 1, st: st("n1", "LEADER", 5, "n1")},
		{idx: 2, st: st("n2", "FOLLOWER", 5, "n1")}, // t0+11ms: n1 again, at term 5
	})
	c := tr.result(end)
	if got, want := c.leaderChanges, []harness.Leader{{ID: "n1", Term: 4}, {ID: "n1", Term: 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("leader changes %v, want %v", got, want)
	}
	if c.termSteps != 2 || c.faultedSteps != 1 || c.maxTerm != 5 {
		t.Errorf("term steps %d (faulted %d), max term %d; want 2 (1), 5", c.termSteps, c.faultedSteps, c.maxTerm)
	}
	if want := map[string]int64{"n1": 1, "n2": 1}; !reflect.DeepEqual(c.termRaisers, want) {
		t.Errorf("term raisers %v, want %v", c.termRaisers, want)
	}
	// Lost at +5 ms (n1 and n2 name no leader), back at +7 ms; at +9 ms n0 and n1 still agree
	// on n1@4, lost at +10 ms when n1 moves to term 5 alone, back at +11 ms.
	if c.leaderless != 3*time.Millisecond || c.maxLeaderless != 2*time.Millisecond {
		t.Errorf("leaderless %v (max %v), want 3ms (2ms)", c.leaderless, c.maxLeaderless)
	}
	if c.violation != "" {
		t.Errorf("violation %q", c.violation)
	}
}

// TestCalmTrackerOpenLeaderless: a run that ends without a leader counts the time up to its end;
// two leaders named in one term are reported.
func TestCalmTrackerOpenLeaderless(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := newCalmTracker(3, harness.Leader{ID: "n0", Term: 3}, t0)
	at := feed(tr, t0, []calmStep{
		{idx: 0, st: st("n0", "LEADER", 3, "n0")},
		{idx: 1, st: st("n1", "FOLLOWER", 3, "n0")}, // +2ms: a quorum
		{idx: 1, err: true},                         // +3ms: lost
		{idx: 2, st: st("n2", "FOLLOWER", 3, "n2")}, // names another leader in term 3
	})
	c := tr.result(at.Add(10 * time.Millisecond))
	if c.leaderless != 11*time.Millisecond {
		t.Errorf("leaderless %v, want 11ms (from +3ms to the end at +14ms)", c.leaderless)
	}
	if !strings.Contains(c.violation, "two leaders in term 3") {
		t.Errorf("violation %q, want two leaders in term 3", c.violation)
	}
}

func TestParseCalmScenarios(t *testing.T) {
	all, err := ParseCalmScenarios("all")
	if err != nil || !reflect.DeepEqual(all, CalmScenarios) {
		t.Fatalf("all = %v %v", all, err)
	}
	got, err := ParseCalmScenarios("restart-loop, flap-follower,restart-loop")
	if err != nil || !reflect.DeepEqual(got, []string{CalmRestartLoop, CalmFlapFollower}) {
		t.Fatalf("list = %v %v", got, err)
	}
	if _, err := ParseCalmScenarios("flap"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}

// TestCalmRestartLoopSmoke runs the real thing briefly: restart-loop on a 3-member group of
// real processes for 3 s. It checks the harness (a scenario line with faults and nothing
// broken, the summary, no member process left behind), never the counts: those are what
// the benchmark reports.
func TestCalmRestartLoopSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-member group as real processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dledger")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../dledger").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	o := Options{Members: 3, Scenarios: []string{CalmRestartLoop}, Profile: "lan", Binary: bin,
		Duration: 3 * time.Second, Poll: 2 * time.Millisecond, LogLevel: "info", Group: "smoke",
		CPUQuota: 0.05, CPUPeriod: time.Second, CPUMethod: CPUMethodAuto}
	if err := o.Resolve(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	o.Out = &stdout
	if _, err := Run(ctx, o); err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, stdout.String())
	}
	fields := map[string]map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "calm: ")
		if !ok || !strings.Contains(rest, "=") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["scenario"] != "" {
			fields[f["scenario"]] = f
		} else if strings.HasPrefix(rest, "summary ") {
			fields["summary"] = f
		}
	}
	s := fields[CalmRestartLoop]
	if s == nil || s["faults"] == "" || s["faults"] == "0" || s["broken"] != "0" || s["leader_changes"] == "" {
		t.Errorf("scenario line %v: want faults > 0, broken=0, the counts\n%s", s, stdout.String())
	}
	if sum := fields["summary"]; sum == nil || sum["ran"] != "1" || sum["broken"] != "0" {
		t.Errorf("summary %v: want ran=1 broken=0\n%s", sum, stdout.String())
	}
	if left := processesRunning(bin); len(left) > 0 {
		t.Errorf("member processes left running: %v", left)
	}
}

// processesRunning lists the pids whose command line starts with bin.
func processesRunning(bin string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(b), bin+"\x00") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCalmTrackerStall: the longest silence counts members never faulted only: a faulted
// member's silence is the fault itself, and a forgotten (stopped) member's gap is no silence.
func TestCalmTrackerStall(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := newCalmTracker(3, harness.Leader{ID: "n0", Term: 3}, t0)
	tr.markFaulted("n1")
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	for _, o := range []harness.Observation{
		{Idx: 0, At: at(1), St: st("n0", "LEADER", 3, "n0")},
		{Idx: 1, At: at(1), St: st("n1", "FOLLOWER", 3, "n0")},
		{Idx: 2, At: at(1), St: st("n2", "FOLLOWER", 3, "n0")},
		{Idx: 0, At: at(4), St: st("n0", "LEADER", 3, "n0")},
		{Idx: 2, At: at(6), Err: errNoAnswer},
		{Idx: 2, At: at(8), St: st("n2", "FOLLOWER", 3, "n0")},  // silent 7 ms, through an error
		{Idx: 1, At: at(30), St: st("n1", "FOLLOWER", 3, "n0")}, // faulted: cut off 29 ms
	} {
		tr.observe(o)
	}
	tr.forget(0, at(9)) // stopped: the gap until its next answer is the fault's
	tr.observe(harness.Observation{Idx: 0, At: at(40), St: st("n0", "LEADER", 3, "n0")})
	if got, want := tr.result(at(40)).stall, (stall{d: 7 * time.Millisecond, member: "n2", end: at(8)}); got != want {
		t.Fatalf("stall %+v, want %+v", got, want)
	}
}
