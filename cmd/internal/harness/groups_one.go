package harness

// One group's crash failover on a host of many groups (issue 29: "one group's crash failover,
// 1 group vs 10,000 groups on the host, no slower than 1.2x"): `dledger bench groups
// --one-failover K`. The same three hosts, but every group has a preferred leader (docs/protocol.md
// 7.9): g0 prefers n0, every other group n1 or n2 in turn, so at steady state host0 leads g0
// and nothing else while it is a member of every group. Each of K trials kills host0 (kill -9,
// five heartbeat intervals after g0 is back at it, at a random phase of the heartbeat cycle) and measures g0's failover alone: kill -> the first
// EventBecomesLeader of g0 at a higher term on another host; then the survivors settle, the
// groups it did not lead are checked for a term change (0 expected), host0 restarts on its data
// dirs, and g0 returns to it (its preferred leader). With --groups 1 it is the one-group
// baseline, the same procedure on hosts of one group each.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// OneReport is one run of --one-failover.
type OneReport struct {
	Groups, Trials   int
	P50, P99, Max    float64 // ms, g0's failover over the trials
	OtherTermChanges int     // over the trials: groups other than g0 whose term moved
	ColdP99          float64 // ms: the cold start, every group led
	// ExitP50: kill -> the killed host reaped (its exit done, so its sockets closed: the
	// kernel's teardown, which grows with the process's memory, before any survivor can hear
	// of the death); AfterExitP50 and AfterExitMax: g0's failover less that, per trial (what
	// the survivors take once the death can be heard). Both in ms, over the trials.
	ExitP50, AfterExitP50, AfterExitMax float64
	samples, exits, afterExit           []time.Duration
}

// Line is `bench-groups-one: key=value ...`; fields are only ever added at the end.
func (r OneReport) Line() string {
	var b strings.Builder
	b.WriteString("bench-groups-one:")
	for _, f := range [][2]any{{"groups", r.Groups}, {"trials", r.Trials}, {"one_crash_p50_ms", r.P50},
		{"one_crash_p99_ms", r.P99}, {"one_crash_max_ms", r.Max}, {"other_term_changes", r.OtherTermChanges},
		{"cold_p99_ms", r.ColdP99}, {"one_exit_p50_ms", r.ExitP50}, {"one_after_exit_p50_ms", r.AfterExitP50},
		{"one_after_exit_max_ms", r.AfterExitMax}} {
		fmt.Fprintf(&b, " %s=%s", f[0], formatField(f[1]))
	}
	return b.String()
}

// onePreferred is group i's preferred leader in the --one-failover layout: host0 for g0 only.
func onePreferred(i, hosts int) string {
	if i == 0 || hosts < 2 {
		return MemberID(0)
	}
	return MemberID(1 + i%(hosts-1))
}

// oneLayout is the configs: lists of the --one-failover layout.
func oneLayout(groups int) func(j int, procs []*HostProc) []ConfigEntry {
	return func(j int, procs []*HostProc) []ConfigEntry {
		var parts []string
		for k, p := range procs {
			parts = append(parts, MemberID(k)+"-"+p.RPCAddr)
		}
		peers := strings.Join(parts, ";")
		out := make([]ConfigEntry, groups)
		for g := range out {
			out[g] = ConfigEntry{Group: GroupName(g), SelfID: MemberID(j), Peers: peers, PreferredLeaderIDs: onePreferred(g, len(procs))}
		}
		return out
	}
}

// doOne is a --one-failover run: the cold start, then o.OneFailover trials.
func (g *groupsRun) doOne(ctx context.Context, dir string) (OneReport, error) {
	nan := math.NaN()
	rep := OneReport{Groups: g.o.Groups, Trials: g.o.OneFailover, ColdP99: nan, P50: nan, P99: nan, Max: nan,
		ExitP50: nan, AfterExitP50: nan, AfterExitMax: nan}
	h, err := NewHosts(dir, HostLayout{Binary: g.o.Binary, Hosts: groupsHosts, Groups: g.o.Groups,
		Profile: g.o.Profile, LogLevel: g.o.LogLevel, Configs: oneLayout(g.o.Groups)})
	if err != nil {
		return rep, err
	}
	defer h.Shutdown()
	stop := context.AfterFunc(ctx, h.Shutdown)
	defer stop()
	g.follow(h)
	if err := g.coldStart(ctx); err != nil {
		return rep, fmt.Errorf("cold start: %w", err)
	}
	rep.ColdP99 = g.rep.ColdP99
	for trial := 1; trial <= g.o.OneFailover; trial++ {
		if err := g.oneTrial(ctx, trial, &rep); err != nil {
			return rep, err
		}
	}
	rep.P50, rep.P99, rep.Max = Percentile(rep.samples, 50), Percentile(rep.samples, 99), Percentile(rep.samples, 100)
	rep.ExitP50 = Percentile(rep.exits, 50)
	rep.AfterExitP50, rep.AfterExitMax = Percentile(rep.afterExit, 50), Percentile(rep.afterExit, 100)
	return rep, nil
}

// oneTrial is one kill of host0 while it leads g0 alone: g0's failover into rep, the other
// groups' term changes, host0's restart and g0's return to it.
func (g *groupsRun) oneTrial(ctx context.Context, trial int, rep *OneReport) error {
	g0 := GroupName(0)
	before, err := g.awaitPreferred(ctx)
	if err != nil {
		return fmt.Errorf("trial %d: %w", trial, err)
	}
	var term int64
	for _, s := range before {
		if s.Group == g0 {
			term = s.Term
		}
	}
	// Five heartbeat intervals at the preferred leader before the kill, as at steady state:
	// its followers have its explicit heartbeats, and with them the order of succession
	// (docs/protocol.md 7.11), which a kill right after the hand-over would find them
	// without (both campaign at once and split the vote: 150-450 ms instead of a few ms,
	// whatever the number of groups). Then a random phase of the heartbeat cycle.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5*g.o.cfg.HeartBeatInterval + time.Duration(rand.Int64N(int64(g.o.cfg.HeartBeatInterval)))):
	}
	t0 := time.Now()
	if err := g.hosts.Kill(0); err != nil { // returns once host0 is reaped
		return err
	}
	exited := time.Since(t0)
	led, err := g.awaitLeaders(ctx, t0, map[string]int64{g0: term}, 0, fmt.Sprintf("trial %d: kill -9 of host0", trial))
	if err != nil {
		return err
	}
	took := led[g0].At.Sub(t0)
	rep.samples = append(rep.samples, took)
	rep.exits = append(rep.exits, exited)
	rep.afterExit = append(rep.afterExit, max(0, took-exited))
	after, err := g.awaitStable(ctx, fmt.Sprintf("trial %d: the survivors", trial))
	if err != nil {
		return err
	}
	rep.OtherTermChanges += TermChanges(before, after, map[string]bool{g0: true})
	restart := time.Now()
	if err := g.hosts.Start(0); err != nil {
		return err
	}
	if _, err := g.awaitPreferred(ctx); err != nil {
		return fmt.Errorf("trial %d, after host0's restart: %w", trial, err)
	}
	g.progress("trial %d: g0 failed over in %.1f ms (host0 reaped after %.1f ms); %d other groups' terms moved so far; host0 back and leading g0 %.0f ms after its restart",
		trial, Ms(took), Ms(exited), rep.OtherTermChanges, Ms(time.Since(restart)))
	return nil
}

// awaitPreferred polls until every group is stable and led by its preferred leader's host (so
// host0 leads g0 and nothing else), and returns that snapshot's groups.
func (g *groupsRun) awaitPreferred(ctx context.Context) ([]GroupState, error) {
	deadline := time.Now().Add(g.o.Timeout)
	period := 100*time.Millisecond + time.Duration(g.o.Groups)*20*time.Microsecond
	last := "no answer"
	for {
		s, err := g.hosts.Snapshot(ctx)
		if err != nil {
			last = err.Error()
		} else if n := s.Unstable(g.names); n > 0 {
			last = fmt.Sprintf("%d of %d groups not stable", n, len(g.names))
		} else {
			gs := s.Groups()
			wrong := 0
			for _, st := range gs {
				idx, _ := strconv.Atoi(strings.TrimPrefix(st.Group, "g"))
				if MemberID(st.LeaderHost) != onePreferred(idx, groupsHosts) {
					wrong++
				}
			}
			if wrong == 0 {
				return gs, nil
			}
			last = fmt.Sprintf("%d of %d groups not led by their preferred leader", wrong, len(gs))
		}
		if err := g.hosts.UnexpectedExit(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not every group at its preferred leader after %v: %s", g.o.Timeout, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(period):
		}
	}
}
