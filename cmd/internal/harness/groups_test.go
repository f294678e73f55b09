package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// The config a benchmark host starts with is DLedger's proxy list as server.ParseHostMembers
// reads it: every entry, with its peers and preferred leaders, and a (group, id) of any
// spelling quoted so YAML cannot turn it into a number or a boolean.
func TestRenderHostConfigParses(t *testing.T) {
	entries := []ConfigEntry{
		{Group: "g0", SelfID: "n0", Peers: "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"},
		{Group: "true", SelfID: "n1", Peers: "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3", PreferredLeaderIDs: "n1"},
		{Group: "007", SelfID: "n0", Peers: "n0-127.0.0.1:1;n1-127.0.0.1:2"},
	}
	text := RenderHostConfig([]string{"listen", "127.0.0.1:1", "data-dir", "/tmp/x y"}, entries)
	if !strings.HasPrefix(text, "listen: \"127.0.0.1:1\"\ndata-dir: \"/tmp/x y\"\nconfigs:\n") {
		t.Fatalf("settings not first, in order:\n%s", text)
	}
	_, list, _ := strings.Cut(text, "configs:\n")
	ms, err := server.ParseHostMembers(strings.NewReader("configs:\n"+list), "host.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(entries) {
		t.Fatalf("%d members, want %d", len(ms), len(entries))
	}
	for i, m := range ms {
		e := entries[i]
		if m.Group != e.Group || m.SelfID != e.SelfID || m.Peers != e.Peers || strings.Join(m.PreferredLeaderIDs, ";") != e.PreferredLeaderIDs {
			t.Errorf("entry %d read back as %+v, want %+v", i, m, e)
		}
	}
}

// A host of 10,000 groups has a config file under a megabyte (one flow mapping per line).
func TestHostsConfigOfTenThousandGroups(t *testing.T) {
	dir := t.TempDir()
	h, err := NewHosts(dir, HostLayout{Binary: "/bin/true", Hosts: 3, Groups: 10000, Profile: "lan", LogLevel: "info"})
	if err != nil {
		t.Fatal(err)
	}
	for j, p := range h.Procs {
		b, err := os.ReadFile(p.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= 1<<20 {
			t.Errorf("host%d's config is %d bytes", j, len(b))
		}
		_, list, ok := strings.Cut(string(b), "configs:\n")
		if !ok || !strings.Contains(string(b), "listen: \""+p.RPCAddr+"\"\n") || !strings.Contains(string(b), "http: \""+p.HTTPAddr+"\"\n") {
			t.Fatalf("host%d's config lacks its addresses:\n%.300s", j, b)
		}
		if j > 0 {
			continue // reading one host's 10,000 entries back is enough (and -race makes it slow)
		}
		ms, err := server.ParseHostMembers(strings.NewReader("configs:\n"+list), p.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 10000 || ms[9999].Group != "g9999" || ms[0].SelfID != MemberID(j) || ms[0].Peers != h.Peers {
			t.Fatalf("host%d: %d members, last %+v", j, len(ms), ms[len(ms)-1])
		}
	}
	if got := strings.Count(h.Peers, ";"); got != 2 || !strings.HasPrefix(h.Peers, "n0-127.0.0.1:") {
		t.Fatalf("peers %q", h.Peers)
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and ')' must not shift the fields; utime 250 + stime 50 ticks.
	line := "4242 (dl (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 1000000 500 18446744073709551615\n"
	d, sys, err := parseStatCPU([]byte(line))
	if err != nil || d != 3*time.Second || sys != 500*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v, %v; want 3s, 500ms", d, sys, err)
	}
	if _, _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
	}
	rss, anon, threads, err := parseStatus([]byte("Name:\tdledger\nVmRSS:\t   20480 kB\nRssAnon:\t   12288 kB\nThreads:\t7\n"))
	if err != nil || rss != 20<<20 || anon != 12<<20 || threads != 7 {
		t.Fatalf("parseStatus = %d %d %d %v", rss, anon, threads, err)
	}
	if _, anon, _, err := parseStatus([]byte("Name:\tx\nVmRSS:\t1 kB\nThreads:\t7\n")); err != nil || anon != -1 {
		t.Fatalf("without RssAnon: anon %d, %v", anon, err)
	}
	if _, _, _, err := parseStatus([]byte("Name:\tx\nThreads:\t7\n")); err == nil {
		t.Fatal("a status without VmRSS parsed")
	}
}

// ReadProcUsage on this test process: it has memory, threads and open files.
func TestReadProcUsageSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	u, err := ReadProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS < 1<<20 || u.Threads < 1 || u.FDs < 3 || u.CPU < 0 {
		t.Fatalf("implausible usage %+v", u)
	}
}

// The follower keeps a line that is still being written until its newline arrives, reads only
// what the file gained, and keeps only the elector's events, with their group fields.
func TestLogFollowerEvents(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host0.log")
	os.WriteFile(path, []byte(`{"level":"info","ts":"2026-01-02T03:04:05.000001Z","msg":"becomes leader","group":"old","self":"n0","term":9}`+"\n"), 0o644)
	f := NewLogFollower([]string{path, filepath.Join(dir, "absent.log")})
	if evs := f.Poll(); len(evs) != 0 {
		t.Fatalf("lines before the follower started: %v", evs)
	}
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.WriteString("=== bench: start host0\n")
	w.WriteString(`{"level":"info","ts":"2026-01-02T03:04:06.000002Z","msg":"heartbeat","group":"g1","self":"n0","term":3}` + "\n")
	w.WriteString(`{"level":"info","ts":"2026-01-02T03:04:06.500000Z","msg":"becomes cand`)
	if evs := f.Poll(); len(evs) != 0 {
		t.Fatalf("a half line or another message read as an event: %v", evs)
	}
	w.WriteString(`idate","group":"g1","self":"n0","term":4}` + "\n")
	w.WriteString(`{"level":"info","ts":"2026-01-02T03:04:06.700000Z","msg":"becomes leader","group":"g1","self":"n0","term":4}` + "\n")
	evs := f.Poll()
	want := []GroupEvent{
		{Host: 0, At: time.Date(2026, 1, 2, 3, 4, 6, 500000000, time.UTC), Msg: dledger.EventBecomesCandidate, Group: "g1", Self: "n0", Term: 4},
		{Host: 0, At: time.Date(2026, 1, 2, 3, 4, 6, 700000000, time.UTC), Msg: dledger.EventBecomesLeader, Group: "g1", Self: "n0", Term: 4},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %v, want %v", evs, want)
	}
	for i := range want {
		if !evs[i].At.Equal(want[i].At) || evs[i].Msg != want[i].Msg || evs[i].Group != want[i].Group || evs[i].Term != want[i].Term {
			t.Errorf("event %d = %+v, want %+v", i, evs[i], want[i])
		}
	}
	if evs := f.Poll(); len(evs) != 0 {
		t.Fatalf("read twice: %v", evs)
	}
}

// leaderEvents gives a test's time origin, its times in ms from it, and an EventBecomesLeader
// of a host at such a time.
func leaderEvents() (t0 time.Time, at func(ms int) time.Time, lead func(host, ms int, group string, term int64) GroupEvent) {
	t0 = time.Unix(1000, 0)
	at = func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lead = func(host, ms int, group string, term int64) GroupEvent {
		return GroupEvent{Host: host, At: at(ms), Msg: dledger.EventBecomesLeader, Group: group, Term: term}
	}
	return t0, at, lead
}

func TestFirstLeaders(t *testing.T) {
	t0, at, lead := leaderEvents()
	evs := []GroupEvent{
		lead(1, -5, "a", 8), // before the fault
		lead(0, 10, "a", 8), // the killed host (skipped)
		lead(1, 20, "a", 7), // not above the old term
		lead(2, 40, "a", 8), // the first that counts
		lead(1, 30, "b", 6), // read later than a's but earlier: the earliest wins
		lead(2, 25, "b", 6), //
		{Host: 1, At: at(5), Msg: dledger.EventBecomesCandidate, Group: "c", Term: 9},
		lead(1, 50, "other", 99), // not wanted
		lead(2, 60, "z", 0),      // a first election, won at term 0
	}
	got := FirstLeaders(evs, t0, map[string]int64{"a": 7, "b": 5, "c": 8, "z": -1}, 0)
	if len(got) != 3 || got["z"].Term != 0 || got["a"].Host != 2 || !got["a"].At.Equal(at(40)) || !got["b"].At.Equal(at(25)) {
		t.Fatalf("FirstLeaders = %+v", got)
	}
	delete(got, "z")
	lat := Latencies(got, t0)
	if Percentile(lat, 100) != 40 || Percentile(lat, 50) != 25 {
		t.Fatalf("latencies %v", lat)
	}
}

func gj(group, self, role string, term int64, leader string) adminclient.GroupJSON {
	return adminclient.GroupJSON{Group: group, SelfID: self, Role: role, Term: term, LeaderID: leader}
}

// What counts as stable decides when the benchmark measures; a group with two leaders, a
// candidate, a follower of nobody or a member behind in term is not.
func TestSnapshotGroups(t *testing.T) {
	s := Snapshot{
		{gj("a", "n0", "LEADER", 3, "n0"), gj("b", "n0", "FOLLOWER", 5, "n1"), gj("c", "n0", "LEADER", 2, "n0"), gj("d", "n0", "FOLLOWER", 4, "n2")},
		{gj("a", "n1", "FOLLOWER", 3, "n0"), gj("b", "n1", "LEADER", 5, "n1"), gj("c", "n1", "LEADER", 2, "n1"), gj("d", "n1", "CANDIDATE", 5, "")},
		nil, // host 2 down
		{gj("a", "n3", "FOLLOWER", 3, "n0"), gj("b", "n3", "FOLLOWER", 4, "n1")},
	}
	gs := s.Groups()
	if len(gs) != 4 {
		t.Fatalf("groups %+v", gs)
	}
	want := []GroupState{
		{Group: "a", LeaderHost: 0, LeaderID: "n0", Term: 3, Stable: true, Members: 3},
		{Group: "b", LeaderHost: 1, LeaderID: "n1", Term: 5, Stable: false, Members: 3}, // n3 behind in term
		{Group: "c", LeaderHost: -1, Term: 2, Stable: false, Members: 2},                // two leaders
		{Group: "d", LeaderHost: -1, Term: 5, Stable: false, Members: 2},                // no leader
	}
	for i := range want {
		if gs[i] != want[i] {
			t.Errorf("group %s = %+v, want %+v", want[i].Group, gs[i], want[i])
		}
	}
	if n := s.Unstable([]string{"a", "b", "c", "d", "e"}); n != 4 {
		t.Fatalf("unstable %d, want 4 (b, c, d, and e missing)", n)
	}
	if led := LedBy(gs, 3); led[0] != 1 || led[1] != 0 || led[2] != 0 {
		t.Fatalf("led by %v", led)
	}
}

func TestBalanceAndTerms(t *testing.T) {
	if d := BalanceDevPct([]int{34, 33, 33}, 100); math.Abs(d-2) > 1e-9 {
		t.Fatalf("dev %v, want 2", d)
	}
	if d := BalanceDevPct([]int{100, 0, 0}, 100); math.Abs(d-200) > 1e-9 {
		t.Fatalf("dev %v, want 200", d)
	}
	if !math.IsNaN(BalanceDevPct([]int{0, 0, 0}, 0)) {
		t.Fatal("dev of no groups")
	}
	if j, n := MostLed([]int{3, 5, 5}); j != 1 || n != 5 {
		t.Fatalf("MostLed = %d %d", j, n)
	}
	before := []GroupState{{Group: "a", Term: 3}, {Group: "b", Term: 4}, {Group: "c", Term: 1}, {Group: "d", Term: 1}}
	after := []GroupState{{Group: "a", Term: 3}, {Group: "b", Term: 6}, {Group: "c", Term: 2}}
	if n := TermChanges(before, after, map[string]bool{"b": true}); n != 2 {
		t.Fatalf("TermChanges = %d, want 2 (c moved, d missing)", n)
	}
}

// The summary line has issue 29's keys, in a fixed order, and the JSON form the same keys
// with NaN as null.
func TestGroupsReportLine(t *testing.T) {
	o := GroupsOptions{Groups: 100, Profile: "lan"}
	r := newGroupsReport(o, 3)
	r.IdleCPUPct, r.ColdP99, r.OtherTermChanges = 1.25, 812.04, 0
	line := r.Line()
	if !strings.HasPrefix(line, "bench-groups: groups=100 hosts=3 profile=lan idle_cpu_pct=1.2 rss_mib_per_host=NaN cold_p99_ms=812.0 ") {
		t.Fatalf("line %q", line)
	}
	for _, k := range []string{"groups", "idle_cpu_pct", "rss_mib_per_host", "cold_p99_ms", "crash_p50_ms", "crash_p99_ms",
		"other_term_changes", "balance_max_dev_pct", "balance_rejoin_max_dev_pct"} {
		if !strings.Contains(line, " "+k+"=") {
			t.Errorf("line lacks %s: %q", k, line)
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.JSON()), &m); err != nil {
		t.Fatalf("JSON %s: %v", r.JSON(), err)
	}
	if m["groups"] != 100.0 || m["rss_mib_per_host"] != nil || m["idle_cpu_pct"] != 1.2 || len(m) != len(r.fields()) {
		t.Fatalf("JSON %v", m)
	}
}

func TestGroupsOptionsResolve(t *testing.T) {
	ok := GroupsOptions{Groups: 10, Runs: 1, Idle: 10 * time.Second, Profile: "lan", LogLevel: "info"}
	if err := ok.Resolve(); err != nil {
		t.Fatal(err)
	}
	if ok.Binary == "" || ok.Timeout != ok.GroupsBound() || ok.Timeout <= ok.cfg.DetectionWindow() {
		t.Fatalf("defaults not filled in: %+v", ok)
	}
	for name, mod := range map[string]func(*GroupsOptions){
		"no groups":  func(o *GroupsOptions) { o.Groups = 0 },
		"no runs":    func(o *GroupsOptions) { o.Runs = 0 },
		"short idle": func(o *GroupsOptions) { o.Idle = 100 * time.Millisecond },
		"warn logs":  func(o *GroupsOptions) { o.LogLevel = "warn" },
		"profile":    func(o *GroupsOptions) { o.Profile = "wan" },
	} {
		o := GroupsOptions{Groups: 10, Runs: 1, Idle: 10 * time.Second, Profile: "lan", LogLevel: "info"}
		mod(&o)
		if err := o.Resolve(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BalancedAt replays leader events over a starting state: 12 groups led 6/6/0, host 2 back
// at t0; it is balanced (within 5 % of 4 each) only when the fourth move lands, not before;
// an event at a term not above the known one (a late duplicate) does not count; and without
// enough moves it never is.
func TestBalancedAt(t *testing.T) {
	var from []GroupState
	for i := range 12 {
		from = append(from, GroupState{Group: fmt.Sprintf("g%d", i), LeaderHost: i % 2, Term: 5, Stable: true})
	}
	t0 := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
	ev := func(ms int, g string, host int, term int64) GroupEvent {
		return GroupEvent{Host: host, At: t0.Add(time.Duration(ms) * time.Millisecond), Msg: dledger.EventBecomesLeader, Group: g, Term: term}
	}
	evs := []GroupEvent{
		ev(-50, "g0", 2, 9), // before the restart: not counted
		ev(30, "g0", 2, 6), ev(10, "g1", 2, 6), ev(20, "g2", 2, 6),
		ev(25, "g2", 2, 6), // the same term again
		{Host: 2, At: t0.Add(35 * time.Millisecond), Msg: dledger.EventMemberStarted, Group: "g3"},
		ev(40, "g3", 2, 6), ev(50, "g4", 2, 6),
	}
	at, ok := BalancedAt(from, evs, t0, 3, 12)
	if !ok || !at.Equal(t0.Add(40*time.Millisecond)) {
		t.Fatalf("BalancedAt = %v %v, want t0+40ms (the fourth move: 4/4/4)", at.Sub(t0), ok)
	}
	if _, ok := BalancedAt(from, evs[:4], t0, 3, 12); ok {
		t.Fatal("balanced after three moves (5/4/3 is 25 % off)")
	}
	if at, ok := BalancedAt(from, nil, t0, 2, 12); !ok || !at.Equal(t0) {
		t.Fatalf("6/6 on two hosts: %v %v, want balanced at once", at, ok)
	}
	// The restarted host's first group: g1 at t0+10ms (the events are not in time order; the
	// one before the restart and the member's start do not count), none for host 1.
	if at, ok := FirstLedAt(evs, t0, 2); !ok || !at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("FirstLedAt(host 2) = %v %v, want t0+10ms", at.Sub(t0), ok)
	}
	if _, ok := FirstLedAt(evs, t0, 1); ok {
		t.Fatal("host 1 led nothing after the restart, yet FirstLedAt found a time")
	}
}

// The --one-failover layout: g0 prefers n0, and no other group does; the others alternate
// between n1 and n2; every entry of host j names itself, every group's peers are the three
// hosts. The summary line has its keys.
func TestOneFailoverLayout(t *testing.T) {
	procs := []*HostProc{{RPCAddr: "127.0.0.1:1"}, {RPCAddr: "127.0.0.1:2"}, {RPCAddr: "127.0.0.1:3"}}
	counts := map[string]int{}
	for j := range procs {
		es := oneLayout(5)(j, procs)
		if len(es) != 5 {
			t.Fatalf("host %d: %d entries", j, len(es))
		}
		for i, e := range es {
			if e.SelfID != MemberID(j) || e.Peers != "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3" || e.Group != GroupName(i) {
				t.Fatalf("host %d entry %d: %+v", j, i, e)
			}
			if j == 0 {
				counts[e.PreferredLeaderIDs]++
			}
		}
	}
	if es := oneLayout(5)(0, procs); es[0].PreferredLeaderIDs != "n0" || counts["n0"] != 1 || counts["n1"] != 2 || counts["n2"] != 2 {
		t.Fatalf("preferred leaders %v (g0: %s)", counts, es[0].PreferredLeaderIDs)
	}
	line := OneReport{Groups: 1, Trials: 2, P50: 3, P99: 4, Max: 4, ColdP99: 5, ExitP50: 1.5, AfterExitP50: 2, AfterExitMax: 2.5}.Line()
	if !strings.HasPrefix(line, "bench-groups-one: groups=1 trials=2 one_crash_p50_ms=3.0 one_crash_p99_ms=4.0 ") ||
		!strings.HasSuffix(line, " cold_p99_ms=5.0 one_exit_p50_ms=1.5 one_after_exit_p50_ms=2.0 one_after_exit_max_ms=2.5") {
		t.Fatalf("line %q", line)
	}
}
