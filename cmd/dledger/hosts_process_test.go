package main

// Real host processes of many groups (issue 29): `dledger server --config FILE` with DLedger's
// proxy list, three hosts each a member of every group, killed with -9, stopped with SIGSTOP,
// restarted; and a port of DLedger's proxy scenarios (three members of one group in one
// process, restart a follower, remove the leader, the preferred leader returns). The hosts
// are harness.Hosts (the benchmark's), so the tests and `dledger bench groups` start and
// observe hosts one way. Every wait is on an event (an elector's log line) or on a state the
// hosts keep (GET /v1/groups), with generous bounds; nothing asserts a speed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/child"
	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/server/adminclient"
)

// hostsLimit bounds every wait of these tests: generous, as every election wait on the busy
// 2-core machine.
const hostsLimit = 30 * time.Second

type hostProcs struct {
	t *testing.T
	*harness.Hosts
	logs  *harness.LogFollower
	names []string
}

// newHostProcs lays out hosts (binary built here) and registers their cleanup: every host is
// killed when the test ends, pass or fail, and a failed test prints the tail of each log.
func newHostProcs(t *testing.T, l harness.HostLayout) *hostProcs {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real host processes")
	}
	dir := t.TempDir()
	l.Binary = buildBinary(t, dir)
	if l.Profile == "" {
		l.Profile = dledger.ProfileLAN
	}
	if l.LogLevel == "" {
		l.LogLevel = "info"
	}
	h, err := harness.NewHosts(filepath.Join(dir, "hosts"), l)
	if err != nil {
		t.Fatal(err)
	}
	hp := &hostProcs{t: t, Hosts: h}
	t.Cleanup(func() {
		h.Shutdown()
		if t.Failed() {
			for _, p := range h.Procs {
				t.Logf("last lines of %s:\n%s", filepath.Base(p.LogPath), child.Tail(p.LogPath, 30))
			}
		}
	})
	var paths []string
	for _, p := range h.Procs {
		paths = append(paths, p.LogPath)
	}
	hp.logs = harness.NewLogFollower(paths)
	for g := 0; g < l.Groups; g++ {
		hp.names = append(hp.names, harness.GroupName(g))
	}
	return hp
}

func (h *hostProcs) startAll() {
	h.t.Helper()
	if err := h.StartAll(); err != nil {
		h.t.Fatal(err)
	}
}

// awaitStable polls the live hosts until every group in names (all of them when nil) is
// stable: one leader, followed at its term by every live member.
func (h *hostProcs) awaitStable(what string, names []string) []harness.GroupState {
	h.t.Helper()
	if names == nil {
		names = h.names
	}
	deadline := time.Now().Add(hostsLimit)
	last := ""
	for {
		s, err := h.Snapshot(context.Background())
		if err == nil {
			if s.Unstable(names) == 0 {
				return s.Groups()
			}
			last = describeUnstable(s.Groups())
		} else {
			last = err.Error()
		}
		if err := h.UnexpectedExit(); err != nil {
			h.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not stable after %v: %s", what, hostsLimit, last)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func describeUnstable(gs []harness.GroupState) string {
	var out []string
	for _, g := range gs {
		if !g.Stable {
			out = append(out, fmt.Sprintf("%s(term %d, %d members, leader %q)", g.Group, g.Term, g.Members, g.LeaderID))
		}
	}
	return fmt.Sprintf("%d unstable: %s", len(out), strings.Join(out, " "))
}

// awaitLeaders waits for an EventBecomesLeader after since, on a host other than skip, at a
// term above want's, for every group of want.
func (h *hostProcs) awaitLeaders(since time.Time, want map[string]int64, skip int) map[string]harness.GroupEvent {
	h.t.Helper()
	deadline := time.Now().Add(hostsLimit)
	for {
		h.logs.Poll()
		led := harness.FirstLeaders(h.logs.Events, since, want, skip)
		if len(led) == len(want) {
			return led
		}
		if err := h.UnexpectedExit(); err != nil {
			h.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after %v, %d of %d groups have no new leader", hostsLimit, len(want)-len(led), len(want))
		}
		time.Sleep(10 * time.Millisecond) // polling interval of the logs
	}
}

// ledBy is the groups (name -> term) host j leads in gs.
func ledBy(gs []harness.GroupState, j int) map[string]int64 {
	out := map[string]int64{}
	for _, g := range gs {
		if g.Stable && g.LeaderHost == j {
			out[g.Group] = g.Term
		}
	}
	return out
}

func byName(gs []harness.GroupState) map[string]harness.GroupState {
	out := map[string]harness.GroupState{}
	for _, g := range gs {
		out[g.Group] = g
	}
	return out
}

// failedOver checks that every group host victim led (before) has a leader elsewhere at a
// higher term, and that no other group's term moved.
func failedOver(t *testing.T, before, after []harness.GroupState, victim int) {
	t.Helper()
	led := ledBy(before, victim)
	now := byName(after)
	for g, term := range led {
		if s := now[g]; s.LeaderHost == victim || s.LeaderHost < 0 || s.Term <= term {
			t.Errorf("group %s (led by host%d at term %d) is now %+v", g, victim, term, s)
		}
	}
	skip := map[string]bool{}
	for g := range led {
		skip[g] = true
	}
	if n := harness.TermChanges(before, after, skip); n != 0 {
		now := byName(after)
		var moved []string
		for _, g := range before {
			if a := now[g.Group]; !skip[g.Group] && a.Term != g.Term {
				moved = append(moved, fmt.Sprintf("%s: host%d at term %d, now host%d at %d", g.Group, g.LeaderHost, g.Term, a.LeaderHost, a.Term))
			}
		}
		t.Errorf("%d groups not led by host%d changed term: %v", n, victim, moved)
	}
}

const manyGroups = 20

// Three hosts with many groups elect; kill -9 of the host leading the most: every group it led
// gets a new leader and no other group's term changes; restarted, it rejoins every group as a
// follower without moving any term; the leader balancer then gives it its share back, a third
// of the groups, by transfers to it only.
func TestHostProcessesManyGroupsCrashRejoin(t *testing.T) {
	h := newHostProcs(t, harness.HostLayout{Hosts: 3, Groups: rebalanceGroups})
	h.startAll()
	// From a balanced steady state (issue 29's target is for one): a crash while the cold
	// start's balancing still moves groups would count those transfers' terms against it.
	before := h.awaitBalanced("cold start", nil, 5)
	victim, n := harness.MostLed(harness.LedBy(before, 3))
	if n == 0 {
		t.Fatalf("no host leads a group: %+v", before)
	}
	t0 := time.Now()
	if err := h.Kill(victim); err != nil {
		t.Fatal(err)
	}
	h.awaitLeaders(t0, ledBy(before, victim), victim)
	survivors := h.awaitStable("after kill -9", nil)
	failedOver(t, before, survivors, victim)
	// The survivors' balancers first share the groups between the two of them; the rejoin is
	// judged from there.
	var live []int
	for j := range h.Procs {
		if j != victim {
			live = append(live, j)
		}
	}
	was := byName(h.awaitBalanced("after kill -9", live, 5))
	marks := h.logMarks()

	if err := h.Start(victim); err != nil {
		t.Fatal(err)
	}
	rejoined := h.awaitStable("after the restart", nil)
	movedOnlyToVictim := func(gs []harness.GroupState, when string) {
		t.Helper()
		for _, g := range gs {
			if g.Members != 3 {
				t.Errorf("%s: group %s has %d members", when, g.Group, g.Members)
			}
			// A rejoin takes no leadership by election (docs/protocol.md L2). Only a leader
			// balancer's transfer may move a group to the restarted host, at a higher term.
			if g.LeaderHost != victim && g.Term != was[g.Group].Term {
				t.Errorf("%s: group %s moved from term %d to %d when host%d rejoined", when, g.Group, was[g.Group].Term, g.Term, victim)
			}
			if g.LeaderHost == victim && g.Term <= was[g.Group].Term {
				t.Errorf("%s: host%d leads group %s at term %d, not above its term %d before", when, victim, g.Group, g.Term, was[g.Group].Term)
			}
		}
	}
	movedOnlyToVictim(rejoined, "after the restart")
	// The leader balancer gives the restarted host its share back: every host leads groups/3
	// (within 5 %, which at 21 groups is exactly 7), by transfers to it only (as above).
	balanced := h.awaitBalanced("after the restart", nil, 5)
	movedOnlyToVictim(balanced, "balanced")
	// Transfers only: since the restart every member that became leader had been asked to take
	// leadership (a transfer's target) first, once per time it led. (A giver may still log
	// "leader steps down" for its own transfer: under load its wait for the transferee can end
	// before the transferee's vote request arrives.)
	asked, took := map[string]int{}, 0
	for _, l := range h.linesSince(marks) {
		key := fmt.Sprintf("host%d %s/%s", l.host, l.Group, l.Self)
		switch l.Msg {
		case "asked to take leadership":
			asked[key]++
		case dledger.EventBecomesLeader:
			if asked[key] == 0 {
				t.Errorf("%s became leader at term %d after the restart, not by a transfer", key, l.Term)
			}
			asked[key]--
			took++
		}
	}
	if took < rebalanceGroups/3 {
		t.Errorf("the hosts' logs show %d leaders since the restart, want at least host%d's share %d", took, victim, rebalanceGroups/3)
	}
}

// logMarks are the sizes of the hosts' logs now, for linesSince.
func (h *hostProcs) logMarks() []int64 {
	marks := make([]int64, len(h.Procs))
	for j, p := range h.Procs {
		if fi, err := os.Stat(p.LogPath); err == nil {
			marks[j] = fi.Size()
		}
	}
	return marks
}

// hostLogLine is a host's zap JSON log line, the fields the tests read.
type hostLogLine struct {
	host  int
	Msg   string `json:"msg"`
	Group string `json:"group"`
	Self  string `json:"self"`
	Term  int64  `json:"term"`
}

// linesSince are the hosts' log lines written after marks (logMarks), each host's in order.
// The hosts append to their logs across restarts (child.Proc).
func (h *hostProcs) linesSince(marks []int64) []hostLogLine {
	h.t.Helper()
	var out []hostLogLine
	for j, p := range h.Procs {
		b, err := os.ReadFile(p.LogPath)
		if err != nil || int64(len(b)) < marks[j] {
			h.t.Fatalf("host%d's log since the mark: %v (%d bytes, mark %d)", j, err, len(b), marks[j])
		}
		for _, raw := range bytes.Split(b[marks[j]:], []byte("\n")) {
			l := hostLogLine{host: j}
			if json.Unmarshal(raw, &l) == nil {
				out = append(out, l)
			}
		}
	}
	return out
}

// rebalanceGroups is a multiple of three, so that each of three hosts' share is whole.
const rebalanceGroups = 21

// awaitBalanced polls the live hosts until every group is stable and each of hosts (all when
// nil) leads within maxDevPct of an even share among them (harness.BalanceDevPct, as `bench
// groups` reports balance).
func (h *hostProcs) awaitBalanced(what string, hosts []int, maxDevPct float64) []harness.GroupState {
	h.t.Helper()
	deadline := time.Now().Add(hostsLimit)
	last := ""
	for {
		s, err := h.Snapshot(context.Background())
		if err == nil {
			gs := s.Groups()
			all := harness.LedBy(gs, len(h.Procs))
			led := all
			if hosts != nil {
				led = nil
				for _, j := range hosts {
					led = append(led, all[j])
				}
			}
			if s.Unstable(h.names) == 0 && harness.BalanceDevPct(led, len(gs)) <= maxDevPct {
				return gs
			}
			last = fmt.Sprintf("led per host %v; %s", led, describeUnstable(gs))
		} else {
			last = err.Error()
		}
		if err := h.UnexpectedExit(); err != nil {
			h.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not balanced within %v%% after %v: %s", what, maxDevPct, hostsLimit, last)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

// SIGSTOP of a host (its sockets stay open): the groups it led fail over after the detection
// window and the others keep their leaders and terms; SIGCONT: it follows in every group.
func TestHostProcessesManyGroupsPause(t *testing.T) {
	h := newHostProcs(t, harness.HostLayout{Hosts: 3, Groups: manyGroups})
	h.startAll()
	// From a balanced steady state (issue 29's target is for one): a pause while the cold
	// start's balancing still moves groups would count those transfers' terms against it. (20
	// groups over 3 hosts: 7, 7 and 6 is 10 % off, 15 % admits nothing more.)
	before := h.awaitBalanced("cold start", nil, 15)
	victim, n := harness.MostLed(harness.LedBy(before, 3))
	if n == 0 {
		t.Fatalf("no host leads a group: %+v", before)
	}
	t0 := time.Now()
	if err := h.Pause(victim); err != nil {
		t.Fatal(err)
	}
	h.awaitLeaders(t0, ledBy(before, victim), victim)
	survivors := h.awaitStable("while host is stopped", nil)
	failedOver(t, before, survivors, victim)

	if err := h.Resume(victim); err != nil {
		t.Fatal(err)
	}
	after := h.awaitStable("after SIGCONT", nil)
	old := ledBy(before, victim)
	for _, g := range after {
		if term, led := old[g.Group]; led && g.LeaderHost == victim && g.Term <= term {
			t.Errorf("group %s: host%d leads again at its old term %d", g.Group, victim, g.Term)
		}
		if g.Members != 3 {
			t.Errorf("group %s has %d members after SIGCONT", g.Group, g.Members)
		}
	}
}

// DLedger's testThreeServerInOneProxy: the three members of one group in one process, next to
// another group of three in the same process, elect.
func TestHostProcessThreeMembersOfOneGroup(t *testing.T) {
	h := newHostProcs(t, harness.HostLayout{Hosts: 1, Groups: 2,
		Configs: func(j int, hosts []*harness.HostProc) []harness.ConfigEntry {
			addr := hosts[0].RPCAddr
			peers := fmt.Sprintf("n0-%s;n1-%s;n2-%s", addr, addr, addr)
			var out []harness.ConfigEntry
			for g := 0; g < 2; g++ {
				for i := 0; i < 3; i++ {
					out = append(out, harness.ConfigEntry{Group: harness.GroupName(g), SelfID: harness.MemberID(i), Peers: peers})
				}
			}
			return out
		}})
	h.startAll()
	gs := h.awaitStable("one process, two groups of three", nil)
	for _, g := range gs {
		if g.Members != 3 || g.LeaderHost != 0 {
			t.Fatalf("group %+v", g)
		}
	}
}

// DLedger's proxy scenario "restart a follower, the leader stays": kill -9 and restart a host
// that leads no group of it; every leader and term stays.
func TestHostProcessesRestartFollowerLeaderStays(t *testing.T) {
	h := newHostProcs(t, harness.HostLayout{Hosts: 3, Groups: 1})
	h.startAll()
	before := h.awaitStable("cold start", nil)
	follower := (before[0].LeaderHost + 1) % 3
	if err := h.Kill(follower); err != nil {
		t.Fatal(err)
	}
	during := h.awaitStable("follower down", nil)
	if err := h.Start(follower); err != nil {
		t.Fatal(err)
	}
	after := h.awaitStable("follower back", nil)
	for _, gs := range [][]harness.GroupState{during, after} {
		if gs[0].LeaderHost != before[0].LeaderHost || gs[0].Term != before[0].Term {
			t.Fatalf("leader moved: %+v, was %+v", gs[0], before[0])
		}
	}
	if after[0].Members != 3 {
		t.Fatalf("follower did not rejoin: %+v", after[0])
	}
}

// DLedger's removeDLedgerServer on the leader, then addDLedgerServer: the leader removed
// through the admin API hands over (another member leads, the other groups keep their terms),
// the host stops listing it; added back, it follows.
func TestHostProcessesRemoveLeaderAddBack(t *testing.T) {
	h := newHostProcs(t, harness.HostLayout{Hosts: 3, Groups: 3})
	h.startAll()
	before := h.awaitStable("cold start", nil)
	g0 := before[0]
	ctx := context.Background()
	t0 := time.Now()
	code, body, err := h.Admin(ctx, g0.LeaderHost, http.MethodDelete, "/v1/groups/"+g0.Group+"/"+g0.LeaderID, "")
	if err != nil || code/100 != 2 {
		t.Fatalf("DELETE %s/%s: %d %s %v", g0.Group, g0.LeaderID, code, body, err)
	}
	h.awaitLeaders(t0, map[string]int64{g0.Group: g0.Term}, g0.LeaderHost)
	after := h.awaitStable("after the removal", nil)
	now := byName(after)
	if s := now[g0.Group]; s.Members != 2 || s.LeaderHost == g0.LeaderHost || s.Term <= g0.Term {
		t.Fatalf("group %s after removing its leader %s: %+v", g0.Group, g0.LeaderID, s)
	}
	if n := harness.TermChanges(before, after, map[string]bool{g0.Group: true}); n != 0 {
		t.Fatalf("%d other groups changed term", n)
	}
	listed, err := h.Groups(ctx, g0.LeaderHost)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(listed, func(m adminclient.GroupJSON) bool { return m.Group == g0.Group }) {
		t.Fatalf("host%d still lists %s after DELETE: %+v", g0.LeaderHost, g0.Group, listed)
	}

	add := fmt.Sprintf(`{"group":%q,"selfId":%q,"peers":%q}`, g0.Group, g0.LeaderID, h.Peers)
	code, body, err = h.Admin(ctx, g0.LeaderHost, http.MethodPut, "/v1/groups/"+g0.Group+"/"+g0.LeaderID, add)
	if err != nil || code/100 != 2 {
		t.Fatalf("PUT %s/%s: %d %s %v", g0.Group, g0.LeaderID, code, body, err)
	}
	back := byName(h.awaitStable("after adding it back", nil))
	if s := back[g0.Group]; s.Members != 3 {
		t.Fatalf("group %s after adding %s back: %+v", g0.Group, g0.LeaderID, s)
	}
}

// DLedger's preferred leader: every group prefers n0 (host 0); kill -9 of host 0 moves them
// away, and when it returns, every group is led by n0 again.
func TestHostProcessesPreferredLeaderReturns(t *testing.T) {
	const groups = 3
	h := newHostProcs(t, harness.HostLayout{Hosts: 3, Groups: groups,
		Configs: func(j int, hosts []*harness.HostProc) []harness.ConfigEntry {
			var parts []string
			for i, p := range hosts {
				parts = append(parts, harness.MemberID(i)+"-"+p.RPCAddr)
			}
			var out []harness.ConfigEntry
			for g := 0; g < groups; g++ {
				out = append(out, harness.ConfigEntry{Group: harness.GroupName(g), SelfID: harness.MemberID(j),
					Peers: strings.Join(parts, ";"), PreferredLeaderIDs: "n0"})
			}
			return out
		}})
	h.startAll()
	h.awaitPreferred("cold start", 0)
	before := h.awaitStable("cold start", nil)
	t0 := time.Now()
	if err := h.Kill(0); err != nil {
		t.Fatal(err)
	}
	h.awaitLeaders(t0, ledBy(before, 0), 0)
	h.awaitStable("host0 down", nil)
	if err := h.Start(0); err != nil {
		t.Fatal(err)
	}
	h.awaitPreferred("host0 back", 0)
}

// awaitPreferred waits until host j leads every group, stably.
func (h *hostProcs) awaitPreferred(what string, j int) {
	h.t.Helper()
	deadline := time.Now().Add(hostsLimit)
	for {
		gs := h.awaitStable(what, nil)
		if len(ledBy(gs, j)) == len(h.names) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: host%d leads %d of %d groups after %v", what, j, len(ledBy(gs, j)), len(h.names), hostsLimit)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}
