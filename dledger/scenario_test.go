package dledger_test

// Scenario tests: whole groups of real electors on the simulator's harness (sim.Cluster:
// virtual time, a simulated network, S1-S5 checked after every event). They live in the
// external test package because dledger/sim imports dledger; the decision-table tests next to
// them (package dledger) drive one elector through its internals instead.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/dledger/sim"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// cluster is a scenario's group: a sim.Cluster whose every step fails the test on a broken
// invariant, with the polling helpers scenarios use.
type cluster struct {
	*sim.Cluster
	t   *testing.T
	cfg dledger.Config
}

// rpcTimeout is a call's timeout in scenarios (heartbeats and votes; a transfer waits
// TransferBound longer).
const rpcTimeout = 500 * time.Millisecond

// newCluster starts n members with cfg; every message takes 1 ms each way.
func newCluster(t *testing.T, n int, cfg dledger.Config, seed uint64) *cluster {
	return newClusterWith(t, sim.ClusterOptions{Seed: seed, Members: n, Config: cfg})
}

func newClusterWith(t *testing.T, o sim.ClusterOptions) *cluster {
	t.Helper()
	if o.RPCTimeout == 0 {
		o.RPCTimeout = rpcTimeout
	}
	c, err := sim.NewCluster(o)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{Cluster: c, t: t, cfg: o.Config}
}

// run advances virtual time by d; a broken invariant fails the test with the trace's tail.
func (c *cluster) run(d time.Duration) {
	c.t.Helper()
	if err := c.Run(d); err != nil {
		tail := ""
		if v, ok := err.(*sim.Violation); ok {
			tail = strings.Join(v.Tail, "\n")
		}
		c.t.Fatalf("%v\n%s\n%s", err, tail, c.Describe())
	}
}

// leader returns the single live leader that a quorum of live members follows, or "".
func (c *cluster) leader() (string, int64) {
	var view []dledgertest.Member
	for _, id := range c.IDs() {
		st := c.Status(id)
		view = append(view, dledgertest.Member{ID: id, Up: c.Up(id), Leading: st.Role == protocol.LEADER,
			LeaderID: st.LeaderID, Term: st.Term})
	}
	id, term, _ := dledgertest.StableLeader(view, len(view))
	return id, term
}

// awaitLeader runs until a leader with a quorum of followers exists, failing after limit.
func (c *cluster) awaitLeader(limit time.Duration) (string, int64) {
	c.t.Helper()
	return c.awaitLeaderID(limit, "")
}

// awaitLeaderID is awaitLeader for a given leader (any, if want is "").
func (c *cluster) awaitLeaderID(limit time.Duration, want string) (string, int64) {
	c.t.Helper()
	for waited := time.Duration(0); waited < limit; waited += 10 * time.Millisecond {
		if id, term := c.leader(); id != "" && (want == "" || id == want) {
			return id, term
		}
		c.run(10 * time.Millisecond)
	}
	c.t.Fatalf("no leader %s within %v; statuses: %s", want, limit, c.Describe())
	return "", 0
}

// electionBound is a generous bound on one election: detection plus several vote rounds.
func electionBound(cfg dledger.Config) time.Duration {
	return cfg.DetectionWindow() + 10*(cfg.MaxVoteRound()+cfg.MaxVoteInterval)
}

func TestScenarioGroupsElectExactlyOneLeader(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, profile := range dledger.Profiles() {
			for seed := uint64(1); seed <= 5; seed++ {
				t.Run(fmt.Sprintf("%d_members_%s_seed%d", n, profile, seed), func(t *testing.T) {
					cfg, _ := dledger.Profile(profile)
					c := newCluster(t, n, cfg, seed)
					id, term := c.awaitLeader(electionBound(cfg))
					// Stable: the same leader, at the same term, for many detection windows.
					c.run(5 * cfg.DetectionWindow())
					if id2, term2 := c.leader(); id2 != id || term2 != term {
						t.Fatalf("leader changed from %s@%d to %s@%d without a fault", id, term, id2, term2)
					}
					for _, m := range c.IDs() {
						if st := c.Status(m); st.Term != term || st.LeaderID != id {
							t.Fatalf("%s at term %d follows %q", m, st.Term, st.LeaderID)
						}
					}
				})
			}
		}
	}
}

func TestScenarioLeaderCrashElectsNewLeaderAtHigherTerm(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cfg := dledger.DefaultConfig()
			c := newCluster(t, n, cfg, 7)
			old, term := c.awaitLeader(electionBound(cfg))
			c.Crash(old)
			id, term2 := c.awaitLeader(electionBound(cfg))
			if id == old || term2 <= term {
				t.Fatalf("after crashing %s@%d the leader is %s@%d", old, term, id, term2)
			}
		})
	}
}

func TestScenarioFollowersVanishLeaderStepsDownAtSameTerm(t *testing.T) {
	cfg := dledger.DefaultConfig()
	c := newCluster(t, 3, cfg, 3)
	id, term := c.awaitLeader(electionBound(cfg))
	for _, m := range c.IDs() {
		if m != id {
			c.Crash(m)
		}
	}
	c.run(cfg.DetectionWindow() + 50*time.Millisecond)
	st := c.Status(id)
	if st.Role != protocol.CANDIDATE || st.Term != term {
		t.Fatalf("lonely leader is %v at term %d, want candidate at %d", st.Role, st.Term, term)
	}
	// Alone, it keeps probing at the same term instead of inflating it.
	c.run(20 * cfg.MaxVoteRound())
	if st := c.Status(id); st.Term != term {
		t.Fatalf("isolated ex-leader raised its term to %d", st.Term)
	}
}

func TestScenarioRestartedFollowerRejoinsWithoutLeaderChange(t *testing.T) {
	cfg := dledger.DefaultConfig()
	c := newCluster(t, 3, cfg, 11)
	id, term := c.awaitLeader(electionBound(cfg))
	var f string
	for _, m := range c.IDs() {
		if m != id {
			f = m
			break
		}
	}
	c.Crash(f)
	c.run(3 * cfg.DetectionWindow())
	c.Restart(f)
	c.run(5 * cfg.DetectionWindow())
	if id2, term2 := c.leader(); id2 != id || term2 != term {
		t.Fatalf("leader went from %s@%d to %s@%d after a follower restart", id, term, id2, term2)
	}
	if st := c.Status(f); st.Role != protocol.FOLLOWER || st.LeaderID != id {
		t.Fatalf("restarted follower is %v following %q", st.Role, st.LeaderID)
	}
}

func TestScenarioIsolatedFollowerRejoinsWithoutLeaderChange(t *testing.T) {
	cfg := dledger.DefaultConfig()
	c := newCluster(t, 3, cfg, 5)
	id, term := c.awaitLeader(electionBound(cfg))
	f := c.IDs()[0]
	if f == id {
		f = c.IDs()[1]
	}
	c.Isolate(f, true)
	c.run(10 * cfg.DetectionWindow())
	c.Isolate(f, false)
	c.run(5 * cfg.DetectionWindow())
	if id2, term2 := c.leader(); id2 != id || term2 != term {
		t.Fatalf("L2: leader went from %s@%d to %s@%d after a follower was cut off", id, term, id2, term2)
	}
}

func TestScenarioStaleLedgerIsNeverElected(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		cfg := dledger.DefaultConfig()
		c := newCluster(t, 3, cfg, seed)
		c.SetLedger("n0", memberstate.LedgerEnd{Term: 1, Index: 50}) // newer index, older term
		c.SetLedger("n1", memberstate.LedgerEnd{Term: 2, Index: 10})
		c.SetLedger("n2", memberstate.LedgerEnd{Term: 2, Index: 10})
		id, _ := c.awaitLeader(electionBound(cfg))
		if id == "n0" {
			t.Fatalf("seed %d: the member with the stale ledger was elected", seed)
		}
		// Even when the newer members are the ones that crash one at a time, n0 cannot win with
		// one of them left: it needs that member's vote, which its ledger does not earn.
		c.Crash(id)
		c.run(3 * electionBound(cfg))
		if st := c.Status("n0"); st.Role == protocol.LEADER {
			t.Fatalf("seed %d: stale n0 became leader with a newer member alive", seed)
		}
	}
}

// With a 120 ms one-way delay on the lan profile (200 ms heartbeats, leak 3) every answer comes
// after the next round has replaced its own. Answers to replaced rounds still prove the
// followers follow: the leader must keep leading (issue 18: it stepped down every 600 ms). And
// when the answers stop, check-quorum must still step it down.
func TestScenarioSlowLinkKeepsItsLeader(t *testing.T) {
	cfg := dledger.DefaultConfig()
	const oneWay = 120 * time.Millisecond
	c := newClusterWith(t, sim.ClusterOptions{Seed: 7, Members: 3, Config: cfg, OneWay: oneWay})
	leader, term := c.awaitLeader(electionBound(cfg))
	c.run(cfg.DetectionWindow()) // settle: the last followers hear the leader
	for _, m := range c.IDs() {
		c.Events(m)
	}
	c.run(10 * time.Second)
	for _, m := range c.IDs() {
		if evs := c.Events(m); len(evs) != 0 {
			t.Fatalf("%s changed role on a slow but healthy network: %+v", m, evs)
		}
	}
	if id, term2 := c.leader(); id != leader || term2 != term {
		t.Fatalf("leader %s@%d became %s@%d", leader, term, id, term2)
	}
	// Answers stop: the leader is cut off and steps down within the detection window plus one
	// round trip (its newest acknowledged round was sent that long before) and a pass.
	c.Isolate(leader, true)
	c.run(cfg.DetectionWindow() + 2*oneWay + 2*cfg.MaintainInterval)
	if st := c.Status(leader); st.Role == protocol.LEADER {
		t.Fatalf("a leader cut off for %v still leads", cfg.DetectionWindow()+2*oneWay)
	}
}

// Issue 12 item 1 on the deterministic cluster. Ledgers (5,100), (5,100), (5,50). The leader's
// up-to-date peer restarts (kill -9) and comes back without its ledger reported. Then the
// leader dies. The stale member must not win: the restarted one grants nothing until its
// ledger is reported; after the report the group elects the up-to-date member.
func TestScenarioRestartedSidecarDoesNotElectAStaleReplica(t *testing.T) {
	cfg := dledger.DefaultConfig()
	for seed := uint64(1); seed <= 4; seed++ {
		c := newClusterWith(t, sim.ClusterOptions{Seed: seed, Members: 3, Config: cfg, LedgerFromStorage: true})
		ledgers := []memberstate.LedgerEnd{{Term: 5, Index: 100}, {Term: 5, Index: 100}, {Term: 5, Index: 50}}
		for i, m := range c.IDs() {
			c.SetLedger(m, ledgers[i])
		}
		leader, _ := c.awaitLeader(electionBound(cfg))
		if leader == "n2" {
			t.Fatalf("seed %d: the stale n2 was elected", seed)
		}
		peer := "n0"
		if leader == "n0" {
			peer = "n1"
		}
		c.Crash(peer)
		c.RestartUnreported(peer)
		c.run(cfg.DetectionWindow())
		if st := c.Status(peer); st.LedgerKnown {
			t.Fatalf("seed %d: %s knows its ledger before the report", seed, peer)
		}
		c.Crash(leader)
		c.run(2 * electionBound(cfg))
		for _, m := range c.IDs() {
			if st := c.Status(m); c.Up(m) && st.Role == protocol.LEADER {
				t.Fatalf("seed %d: %s leads term %d with ledger (%d,%d) while %s's ledger is unreported: %s",
					seed, m, st.Term, st.Ledger.Term, st.Ledger.Index, peer, c.Describe())
			}
		}
		c.Report(peer)
		id, _ := c.awaitLeader(electionBound(cfg))
		if id != peer {
			t.Fatalf("seed %d: after the report %s leads, want the up-to-date %s", seed, id, peer)
		}
	}
}

// A member restarted at a higher term and still abstaining answers the leader's heartbeats
// EXPIRED_TERM, so the leader steps down (D4). Its REJECT_LEDGER_UNKNOWN vote answers carry that
// term; ignored, the old leader won its old term again at once, and again after every heartbeat
// round (hundreds of LEADER events in seconds) until the ledger was reported.
func TestAbstainerAtAHigherTermDoesNotMakeTheLeaderFlap(t *testing.T) {
	cfg := dledger.DefaultConfig()
	c := newClusterWith(t, sim.ClusterOptions{Seed: 1, Members: 3, Config: cfg, LedgerFromStorage: true})
	leader, term := c.awaitLeader(electionBound(cfg))
	a := "n0"
	if leader == "n0" {
		a = "n1"
	}
	c.Crash(a)
	if err := c.Store(a).Save(memberstate.Durable{Term: term + 3}); err != nil {
		t.Fatal(err)
	}
	c.RestartUnreported(a)
	c.Events(leader)
	c.run(9 * cfg.DetectionWindow())
	leads := 0
	for _, ev := range c.Events(leader) {
		if ev.Role == protocol.LEADER {
			leads++
		}
	}
	if leads > 1 { // one new leadership at the abstainer's term is the whole cost
		t.Fatalf("while %s abstained at term %d the old leader %s became leader %d times", a, term+3, leader, leads)
	}
	if id, tm := c.leader(); id == "" || tm < term+3 {
		t.Fatalf("no leader at the abstainer's term: %q@%d", id, tm)
	}
}

// A group started together whose other members come up late: the first of the start-up order,
// whose round nobody answered, asks again as soon as a member connects to it
// (Elector.PeerReachable), not at its start-up retry two passes after that round.
func TestScenarioStartUpRetryWhenAMemberConnects(t *testing.T) {
	cfg, _ := dledger.Profile(dledger.ProfileLAN)
	for _, late := range []string{"n1", "n2"} {
		t.Run(late, func(t *testing.T) {
			c := newClusterWith(t, sim.ClusterOptions{Seed: 1, Members: 3, Config: cfg, RPCTimeout: 3 * time.Millisecond})
			c.Crash("n1") // both still starting: nothing listens yet
			c.Crash("n2")
			// n0's first pass (at 10 ms on the harness's grid) asks; the calls fail 3 ms later and
			// the round is decided short of a quorum, to be retried two passes (20 ms) later.
			c.run(cfg.MaintainInterval + 5*time.Millisecond)
			if st := c.Status("n0"); st.Role != protocol.CANDIDATE || st.LastParseResult != protocol.WaitToRevote {
				t.Fatalf("n0 before anyone else is up: %v, %v", st.Role, st.LastParseResult)
			}
			c.Restart(late)
			from := c.Now()
			for c.Status("n0").Role != protocol.LEADER {
				if c.Now()-from > 2*cfg.MaintainInterval {
					t.Fatalf("n0 not elected within two passes of %s's start:\n%s", late, c.Describe())
				}
				c.run(time.Millisecond)
			}
			// The connection (two one-way delays), the request and its answer: 4 ms.
			if took := c.Now() - from; took > 5*time.Millisecond {
				t.Fatalf("n0 was elected %v after %s started; the connection should have made it ask at once", took, late)
			}
			if st := c.Status("n0"); st.Term != 0 {
				t.Fatalf("elected at term %d, want 0: a retry at the same term", st.Term)
			}
		})
	}
}
