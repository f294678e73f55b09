package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// Hosts of many groups under host faults: every invariant holds, and a seed replays exactly.
func TestHostsRunClean(t *testing.T) {
	transfers := 0
	defer func() {
		if !t.Failed() && transfers == 0 {
			t.Error("no run of hosts asked for a transfer")
		}
	}()
	for seed := uint64(1); seed <= 6; seed++ {
		o := Options{Seed: seed, Hosts: []int{3, 5}[seed%2], Groups: 8, Members: 3}
		if seed%4 == 1 {
			o.Members = 5
		}
		r := mustRun(t, o)
		if r.Violation != nil {
			t.Fatalf("seed %d: %s", seed, r.Report())
		}
		if r.Heals < 3 || r.Elections < o.Groups {
			t.Fatalf("seed %d: %d heals, %d elections: the run did not get far", seed, r.Heals, r.Elections)
		}
		transfers += r.Transfers
		if again := mustRun(t, o); again.TraceHash != r.TraceHash || again.Steps != r.Steps {
			t.Fatalf("seed %d does not replay: hash %x then %x", seed, r.TraceHash, again.TraceHash)
		}
	}
}

// TestRegressionStoppedHostVouchesUntilItsTableLooks: these seeds failed PASS when the table
// read its vouching at the caller's now. A host stopped (SIGSTOP) across the moment its
// followers' leaders' host would turn stale resumed with its table's Due overdue; a member's
// pass on the resume, before that Due, found its leader's host stale though no wake had told
// it, and timed out, while its elector had planned no pass (no timeout while vouched,
// docs/protocol.md 12.3). The table now vouches as it last found a host until it looks (its
// overdue Due, or a frame read), and that look wakes the members it concerns. The seeds
// follow the traces: 86 (dledger) and 129 (lan) found it first, and no longer reached it once
// the host's crash news and the start-up and succession deferrals changed the traces
// (2026-11-28); with that read put back, seeds 1-400 of both profiles found it at 120, 271, 342
// and 365 (dledger), and 342 had found it before the deferral of successors too. Past a change
// of the host traces, put the read back and scan again (every seed here must fail then).
func TestRegressionStoppedHostVouchesUntilItsTableLooks(t *testing.T) {
	for _, o := range []Options{
		{Seed: 342, Hosts: 3, Groups: 20, Members: 3, Profile: dledger.ProfileDLedger},
		{Seed: 120, Hosts: 3, Groups: 20, Members: 3, Profile: dledger.ProfileDLedger},
	} {
		if r := mustRun(t, o); r.Violation != nil {
			t.Errorf("seed %d:\n%s", o.Seed, r.Report())
		}
	}
}

// The planted bugs of the shared parts are caught, with a report that replays them: a table
// that keeps vouching for a host once heard (host-never-stale) as L4; a host whose table's
// news of a dead host only wakes the followers whose leader was there (gone-as-wake) as GONE,
// which L4 alone lets pass (they fail over by silence, a detection window late); a table whose
// index of the members that depend on a peer host keeps a member's first reliance
// (rely-once) as GONE after a crash, or L4 after a pause or an isolation (nobody woken).
func TestCheckerCatchesHostBugs(t *testing.T) {
	for _, c := range []struct {
		broken Broken
		want   []string
	}{
		{BrokenHostNeverStale, []string{"L4"}},
		{BrokenGoneAsWake, []string{"GONE"}},
		{BrokenRelyOnce, []string{"GONE", "L4"}},
	} {
		t.Run(string(c.broken), func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				r := mustRun(t, Options{Seed: seed, Hosts: 3, Groups: 6, Members: 3, Broken: c.broken})
				if r.Violation == nil {
					continue
				}
				if !slices.Contains(c.want, r.Violation.Invariant) {
					t.Fatalf("seed %d: got %s, want one of %v\n%s", seed, r.Violation.Invariant, c.want, r.Report())
				}
				checkReport(t, r)
				t.Logf("caught at seed %d: %s %s", seed, r.Violation.Invariant, r.Violation.Detail)
				return
			}
			t.Fatalf("%s went unnoticed for 20 seeds", c.broken)
		})
	}
}

// What an idle group costs (docs/protocol.md 12.5), over one QuietRefresh (every quiet
// follower's refresh falls in it once): with the tables, a group member sends about one
// request in a thousand and runs about one pass in a hundred of what it does without, but
// some (the refresh is a safety net, not gone); the hosts' frames are one per host pair per
// interval, however many groups.
func TestIdleCost(t *testing.T) {
	cfg, err := dledger.Profile(dledger.ProfileLAN)
	if err != nil {
		t.Fatal(err)
	}
	window := cfg.QuietRefresh()
	measure := func(groups int, noTable bool) IdleCost {
		w := window
		if noTable {
			w = time.Minute // explicit heartbeats: the same every interval
		}
		c, err := MeasureIdle(Options{Seed: 1, Hosts: 3, Groups: groups, Members: 3, NoTable: noTable}, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(c)
		return c
	}
	explicit, quiet := measure(20, true), measure(20, false)
	if quiet.Messages*1000 > explicit.Messages || quiet.Passes*100 > explicit.Passes {
		t.Errorf("quiet groups cost %.4f requests and %.4f passes per member-second, explicit ones %.3f and %.3f",
			quiet.Messages, quiet.Passes, explicit.Messages, explicit.Passes)
	}
	if quiet.Messages == 0 {
		t.Errorf("no explicit heartbeat in %v of quiet groups: the refresh (docs/protocol.md 12.2 rule 3) is gone", window)
	}
	perInterval := float64(time.Second) / float64(cfg.HeartBeatInterval)
	if more := measure(60, false); more.Frames > perInterval*1.05 || quiet.Frames > perInterval*1.05 || more.Frames != quiet.Frames {
		t.Errorf("frames per host pair-second: %.2f with 20 groups, %.2f with 60; want one per interval", quiet.Frames, more.Frames)
	}
	if explicit.Frames != 0 {
		t.Errorf("frames without tables: %.2f", explicit.Frames)
	}
}

func TestHostOptionsBounds(t *testing.T) {
	for _, c := range []struct {
		o  Options
		ok bool
	}{
		{Options{Hosts: MinHosts - 1}, false},
		{Options{Hosts: MinHosts}, true},
		{Options{Hosts: MaxHosts}, true},
		{Options{Hosts: MaxHosts + 1}, false},
		{Options{Hosts: 3, Groups: 1}, true},
		{Options{Hosts: 3, Groups: 10_000}, true},
		{Options{Hosts: 3, Groups: 10_001}, false},
		{Options{Hosts: 3, Groups: -1}, false},
		{Options{Hosts: 3, Members: 3}, true},
		{Options{Hosts: 3, Members: 4}, false},
	} {
		o, _, err := c.o.withDefaults()
		if (err == nil) != c.ok {
			t.Errorf("%+v: err %v, want ok=%v", c.o, err, c.ok)
		}
		if err == nil && c.o.Groups == 0 && o.Groups != 20 {
			t.Errorf("default groups %d, want 20", o.Groups)
		}
	}
}

func TestHostOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{Hosts: 2},
		{Hosts: 3, Members: 5},
		{Hosts: 3, Scenario: ScenarioRejoin},
		{Groups: 3},
		{Broken: BrokenHostNeverStale},
		{Broken: BrokenGoneAsWake},
		{Broken: BrokenRelyOnce},
	} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
}

// A host fault with the tables: every group the host led has a new leader no later than
// without them plus one freshness bound (2 intervals), and no other group changes its term
// (docs/protocol.md 12.4).
func TestFailoverNoSlowerWithTables(t *testing.T) {
	for _, pause := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			o := Options{Seed: seed, Hosts: 3, Groups: 20, Members: 3}
			quiet, err := MeasureFailover(o, pause)
			if err != nil {
				t.Fatal(err)
			}
			o.NoTable = true
			explicit, err := MeasureFailover(o, pause)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pause=%v seed %d: led %d/%d groups; recovery %v with tables, %v without; other groups' term changes %d and %d",
				pause, seed, quiet.Led, explicit.Led, quiet.Recovery, explicit.Recovery, quiet.OtherTermChanges, explicit.OtherTermChanges)
			if quiet.Led == 0 {
				t.Fatalf("the busiest host led no group")
			}
			if quiet.Recovery > explicit.Recovery+400*time.Millisecond {
				t.Errorf("pause=%v seed %d: recovery %v with tables, %v without", pause, seed, quiet.Recovery, explicit.Recovery)
			}
			if quiet.OtherTermChanges != 0 {
				t.Errorf("pause=%v seed %d: %d groups the host did not lead changed their term", pause, seed, quiet.OtherTermChanges)
			}
		}
	}
}

// L3 holds a leader to its bound only while its process runs: a leader stopped (its host
// paused) with a transfer outstanding answers late, which is not a violation; nor is a
// transferee that is stopped while taking leadership.
func TestL3ExemptsAStoppedMember(t *testing.T) {
	hr, cfg, run := checkedHostRun(t, Options{Seed: 3, Hosts: 3, Groups: 2, Members: 3})
	run(L1Bound(cfg))
	for _, g := range hr.groups {
		l := g.leader()
		if l == nil {
			t.Fatal("no leader")
		}
		h := hr.hosts[hr.place(g.gi, l.idx)]
		hr.transfer(g)
		hr.pauseHost(h)
		run(2 * L3Bound(cfg))
		hr.resumeHost(h)
		run(2 * L3Bound(cfg))
	}
	if hr.transfers != 2 {
		t.Fatalf("%d transfers asked, want 2", hr.transfers)
	}
}

// A leader whose storage stops vouching for its ledger (Elector.ForgetLedger: a full or
// failing disk) steps down at once and sends nothing: on hosts its quiet followers, which plan
// no timeout while the table vouches for their leader (docs/protocol.md 12.3), hear of it only
// through the change the table carries, which wakes them (12.1, "Wakes": they rely on their
// leader). They then time out a detection window later and elect one of them. Without that
// wake they slept until their quiet refresh, ten minutes on. The campaign has no fault that
// changes a leader without a message to its followers, so this is the test that fails when
// the change's wake is lost (the review of b25de23 found the campaign passing without it).
func TestQuietFollowersElectWhenTheirLeaderForgetsItsLedger(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		hr, cfg, run := checkedHostRun(t, Options{Seed: seed, Hosts: 3, Groups: 4, Members: 3})
		run(L1Bound(cfg))
		g := hr.groups[0]
		old := g.leader()
		if old == nil {
			t.Fatalf("seed %d: no leader after %v", seed, L1Bound(cfg))
		}
		hr.enter(g)
		for _, m := range g.members {
			if m != old && m.e.NextPassAt().Sub(epoch.Add(g.now)) <= cfg.DetectionWindow() {
				t.Fatalf("seed %d: follower %s plans a pass within a detection window: not quiet, the test shows nothing", seed, m.id)
			}
		}
		term := old.ms.CurrTerm()
		old.e.ForgetLedger("disk full (test)")
		g.check()
		run(L1Bound(cfg))
		l := g.leader()
		if l == nil || l == old || l.ms.CurrTerm() <= term {
			t.Fatalf("seed %d: %v after the leader %s (term %d) forgot its ledger: no new leader among its quiet followers",
				seed, L1Bound(cfg), old.id, term)
		}
	}
}

// checkedHostRun starts the hosts of o (startedHostRun) and returns them, their config, and a
// run that moves them on by d and fails t on a violation, with its replay command.
func checkedHostRun(t *testing.T, o Options) (*hostRun, dledger.Config, func(time.Duration)) {
	t.Helper()
	o, cfg, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	hr := startedHostRun(o, cfg)
	return hr, cfg, func(d time.Duration) {
		t.Helper()
		hr.runFor(d)
		if hr.violation != nil {
			t.Fatalf("%s %s (%s)", hr.violation.Invariant, hr.violation.Detail, hr.violation.Replay)
		}
	}
}
