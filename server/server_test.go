package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// freePorts and peersString are the shared test helpers (dledgertest), under the names this
// package's tests use.
func freePorts(t testing.TB, n int) []int { return dledgertest.FreePorts(t, n) }

func peersString(ports []int) string { return dledgertest.PeersString(ports) }

// fastTimings keep tests quick: a 300 ms failure detector.
func fastTimings() dledger.Config {
	c := dledger.DefaultConfig()
	c.HeartBeatInterval = 100 * time.Millisecond
	c.MinVoteInterval = 50 * time.Millisecond
	c.MaxVoteInterval = 150 * time.Millisecond
	c.VoteRoundBase = 200 * time.Millisecond
	return c
}

type group struct {
	t       *testing.T
	cfg     dledger.Config
	servers []*Server
	dirs    []string
	peers   string
	stopped []bool
	keys    map[int]secure.KeySet // a member's key set instead of testKeys (key rotation)
	tweak   func(i int, c *Config) bool
}

func startGroup(t *testing.T, n int, ledgers map[int][2]int64) *group {
	t.Helper()
	return startGroupWith(t, n, ledgers, fastTimings())
}

// calmTimings keep a group's leader through a loaded machine's stalls, for tests that read
// members after the election and must find them as they were. The heartbeat interval is what
// sets that: with adaptive failure detection (docs/protocol.md 14) the detection window (leak x
// interval, 3 s here) is only a ceiling, and a member without a host's liveness table times out
// a leader at the largest heartbeat gap it measured plus a margin of max(StallThreshold, 4 sd),
// StallThreshold being half the interval. With fastTimings' 100 ms interval (and the leak of 30
// that used to make these timings calm) that margin is 50 ms: under -race on a loaded 2-core
// machine followers timed out ("no heartbeat from leader") and leaders stepped down ("no quorum
// of heartbeat acks") within seconds of a calm election: TestForgedRequestsFromOutsideAreRefused
// failed 13 of 30 runs with two CPU burners beside it. At 1 s the margin is 500 ms, and the
// windows 1.5-3 s: 0 of 40.
func calmTimings() dledger.Config {
	c := fastTimings()
	c.HeartBeatInterval = time.Second
	c.MaxHeartBeatLeak = 3
	return c
}

func startGroupWith(t *testing.T, n int, ledgers map[int][2]int64, cfg dledger.Config) *group {
	t.Helper()
	return startGroupTweaked(t, n, ledgers, cfg, nil)
}

// startGroupTweaked is startGroupWith with tweak applied to each member's Config before New;
// a member whose tweak returns false gets no UpdateLedger before Start (a sidecar that has
// not reported).
func startGroupTweaked(t *testing.T, n int, ledgers map[int][2]int64, cfg dledger.Config, tweak func(i int, c *Config) bool) *group {
	t.Helper()
	g := &group{t: t, cfg: cfg, peers: peersString(freePorts(t, n)), stopped: make([]bool, n), tweak: tweak}
	for i := 0; i < n; i++ {
		g.dirs = append(g.dirs, t.TempDir())
		g.servers = append(g.servers, nil)
		g.start(i, ledgers[i])
	}
	t.Cleanup(func() {
		for i, s := range g.servers {
			if !g.stopped[i] {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				s.Stop(ctx)
				cancel()
			}
		}
	})
	return g
}

func (g *group) start(i int, ledger [2]int64) {
	g.t.Helper()
	keys := testKeys
	if k, ok := g.keys[i]; ok {
		keys = k
	}
	c := Config{Keys: keys, Group: "g", SelfID: fmt.Sprintf("n%d", i), Peers: g.peers, DataDir: g.dirs[i], Election: g.cfg}
	report := true
	if g.tweak != nil {
		report = g.tweak(i, &c)
	}
	s, err := New(c)
	if err != nil {
		g.t.Fatal(err)
	}
	if ledger == [2]int64{} {
		ledger = [2]int64{-1, -1} // an empty ledger, reported as an embedding broker must
	}
	if report {
		if err := s.UpdateLedger(ledger[0], ledger[1]); err != nil {
			g.t.Fatal(err)
		}
	}
	if err := s.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.servers[i], g.stopped[i] = s, false
}

func (g *group) stop(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.servers[i].Stop(ctx); err != nil {
		g.t.Fatal(err)
	}
	g.stopped[i] = true
}

// awaitLeader polls until exactly one running member leads and a quorum of running members
// follow it at its term (dledgertest.StableLeader), or fails after limit. With not set, that
// leader must be another member.
func (g *group) awaitLeader(limit time.Duration, not string) (string, int64) {
	g.t.Helper()
	var id string
	var term int64
	dledgertest.Eventually(g.t, limit, "a single leader followed by a quorum", func() bool {
		var ok bool
		id, term, ok = dledgertest.StableLeader(g.view(), len(g.servers))
		return ok && id != not
	})
	return id, term
}

// awaitLeaderHearingAll waits for a stable leader that has heard every follower's ledger (so
// it can pick one to hand over to). It reads the leader again on each pass: a leader that loses
// its term meanwhile no longer tracks its peers, and waiting on it alone would wait forever.
func (g *group) awaitLeaderHearingAll(limit time.Duration) (string, int64) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		id, term := g.awaitLeader(time.Until(deadline), "")
		ready := 0
		for _, p := range g.servers[g.index(id)].Status().Peers {
			if p.Self || (p.Alive && p.LedgerSet) {
				ready++
			}
		}
		if ready == len(g.servers) {
			return id, term
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("leader %s@%d never heard all its followers within %v", id, term, limit)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// view is what StableLeader needs of every member; stopped members are down.
func (g *group) view() []dledgertest.Member {
	var v []dledgertest.Member
	for i, s := range g.servers {
		st := s.Status()
		v = append(v, dledgertest.Member{ID: st.SelfID, Up: !g.stopped[i], Leading: st.Role == protocol.LEADER,
			LeaderID: st.LeaderID, Term: st.Term})
	}
	return v
}

// awaitAllFollow waits until one member leads and every running member follows it at its
// term (awaitLeader settles for a quorum, so a third member may still be a candidate).
func (g *group) awaitAllFollow(limit time.Duration) (string, int64) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		leader, term := g.awaitLeader(time.Until(deadline), "")
		all := true
		for i, s := range g.servers {
			st := s.Status()
			all = all && (g.stopped[i] || (st.LeaderID == leader && st.Term == term))
		}
		if all {
			return leader, term
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	g.t.Fatalf("not every member followed one leader within %v", limit)
	return "", 0
}

// awaitConnected waits until every running member's rpc client is connected to every other
// running member. Following a leader does not imply it: a follower's own connection to a peer
// may still wait out a redial back-off.
func (g *group) awaitConnected(limit time.Duration) {
	g.t.Helper()
	dledgertest.Eventually(g.t, limit, "every running member connected to every other", func() bool {
		for i, s := range g.servers {
			for j, p := range g.servers {
				if i != j && !g.stopped[i] && !g.stopped[j] && !s.client.Connected(p.cfg.SelfID) {
					return false
				}
			}
		}
		return true
	})
}

func (g *group) index(id string) int {
	var i int
	fmt.Sscanf(id, "n%d", &i)
	return i
}

const electionLimit = 20 * time.Second // generous: a busy 2-core CI machine under -race

func TestInProcessGroupsElectOneLeaderAndFailOver(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d_members", n), func(t *testing.T) {
			g := startGroup(t, n, nil)
			old, term := g.awaitLeader(electionLimit, "")
			g.stop(g.index(old))
			id, term2 := g.awaitLeader(electionLimit, old)
			if id == old || term2 <= term {
				t.Fatalf("after stopping %s@%d the leader is %s@%d", old, term, id, term2)
			}
		})
	}
}

func TestUpdateLedgerMakesAStaleMemberLose(t *testing.T) {
	// n2 has an older last-entry term; n0 and n1 hold newer data. The leader's view of n2's
	// ledger (from its heartbeat answers) shows that UpdateLedger reached n2's elector; n2 must
	// never lead, even after one of the newer members stops (then it can win only with the
	// other newer member's vote, which docs/protocol.md 7.1 row 3 refuses). This used to wait
	// for n2 to be refused a vote, but n2 campaigns only if its first round reaches a voter
	// before the leader's first heartbeat reaches n2: a race CI lost once.
	//
	// The leader is read again on each pass: under -race on a loaded machine fastTimings' first
	// leader can lose its term while the test waits for its view of n2, and a member that no
	// longer leads stops hearing its peers' ledgers, so waiting on it alone could wait forever
	// (TestGracefulStopHandsOverToAFollower's CI failure, df64c5b). Every leader seen on the way
	// is checked not to be n2.
	g := startGroup(t, 3, map[int][2]int64{0: {2, 10}, 1: {2, 10}, 2: {1, 500}})
	var id string
	dledgertest.Eventually(t, electionLimit, "a leader that sees n2's ledger (1,500) and its own (2,10)", func() bool {
		var ok bool
		if id, _, ok = dledgertest.StableLeader(g.view(), len(g.servers)); !ok {
			return false
		}
		if id == "n2" {
			t.Fatal("stale n2 elected")
		}
		st := g.servers[g.index(id)].Status()
		for _, p := range st.Peers {
			if p.ID == "n2" {
				return st.Role == protocol.LEADER && p.LedgerSet && p.Ledger.Term == 1 && p.Ledger.Index == 500 &&
					st.Ledger.Term == 2 && st.Ledger.Index == 10
			}
		}
		return false
	})
	g.stop(g.index(id))
	other := "n0"
	if id == "n0" {
		other = "n1"
	}
	id2, _ := g.awaitLeader(electionLimit, id)
	if id2 != other {
		t.Fatalf("after %s stopped, %s leads; want %s (n2 is stale)", id, id2, other)
	}
}

func TestGracefulStopHandsOverToAFollower(t *testing.T) {
	// calmTimings: under -race on a loaded machine fastTimings' leader can lose its term while
	// the test waits for it to hear its followers (CI failed once so, "leader never heard its
	// followers"), and this test is about the hand-over, not about keeping a leader.
	g := startGroupWith(t, 3, nil, calmTimings())
	old, term := g.awaitLeaderHearingAll(electionLimit)
	leader := g.servers[g.index(old)]
	before := counterValue(t, leader.solo.gatherer, "dledger_leadership_transfers_total", "result", "SUCCESS")
	g.stop(g.index(old))
	// The hand-over happened before Stop returned: a remaining member already leads at exactly
	// term+1. Checked at once, with no waiting: without a hand-over nobody leads yet (the
	// followers need a detection window and a vote round), and an ordinary election would
	// land at term+1 too, so waiting for "a leader at term+1" proves nothing.
	var leaders []string
	for i, s := range g.servers {
		if st := s.Status(); !g.stopped[i] && st.Role == protocol.LEADER {
			if st.Term != term+1 {
				t.Fatalf("new leader %s at term %d, want %d (a hand-over, not an election)", st.SelfID, st.Term, term+1)
			}
			leaders = append(leaders, st.SelfID)
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("when Stop of leader %s@%d returned, the leaders were %v; want one at term %d (handed over)", old, term, leaders, term+1)
	}
	if after := counterValue(t, leader.solo.gatherer, "dledger_leadership_transfers_total", "result", "SUCCESS"); after != before+1 {
		t.Fatalf("stopped leader's transfers{result=SUCCESS} went %v -> %v, want +1", before, after)
	}
	if id, term2 := g.awaitLeader(electionLimit, old); id != leaders[0] || term2 != term+1 {
		t.Fatalf("leader %s at term %d, want %s at %d", id, term2, leaders[0], term+1)
	}
}

// counterValue reads one labelled series of a counter from g (0 if absent).
func counterValue(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestNewRejectsBadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // not there yet: a config error must not create it
	good := Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3", DataDir: dir}
	cases := map[string]func(c *Config){
		"peers":      func(c *Config) { c.Peers = "n0-127.0.0.1" },
		"self":       func(c *Config) { c.SelfID = "n7" },
		"group":      func(c *Config) { c.Group = "" },
		"datadir":    func(c *Config) { c.DataDir = "" },
		"timings":    func(c *Config) { c.Election = fastTimings(); c.Election.MinVoteInterval = c.Election.MaxVoteInterval },
		"preferred":  func(c *Config) { c.Election = fastTimings(); c.Election.PreferredLeaderIDs = []string{"n8"} },
		"profile":    func(c *Config) { c.Profile = "wan" },
		"ledger":     func(c *Config) { c.Ledger = LedgerNone + 1 },
		"unwritable": func(c *Config) { c.DataDir = "/proc/dledger-cannot-write-here" },
	}
	for name, mut := range cases {
		c := good
		mut(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: bad config accepted", name)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the rejected config created the data dir (%v)", name, err)
		}
		if name != "datadir" && name != "unwritable" && c.Validate() == nil {
			t.Errorf("%s: Config.Validate accepts it", name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate of a good config: %v", err)
	}
}

func TestStartFailsCleanlyWhenThePortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ports := freePorts(t, 2)
	peers := fmt.Sprintf("n0-%s;n1-127.0.0.1:%d;n2-127.0.0.1:%d", ln.Addr(), ports[0], ports[1])
	s, err := New(Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: peers, DataDir: t.TempDir(), Ledger: LedgerNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	s.Stop(context.Background())
}

// A stopping leader whose preferred-leader hand-over is in flight must not give up on its own
// hand-over (the first request is refused LEADER_TRANSFERRING): it waits for the preferred
// attempt to end and tries again. Here n2 never runs, so n0 (the newest ledger) is the only
// electable leader; preferred n1 lags, so the preferred attempt fails its catch-up wait. n1
// then catches up, and the stop's second attempt must make it leader before Stop returns.
//
// The timings are calm: the test is about the order of two transfers, and a loaded machine
// (-race, other packages' tests) must not change the outcome the test asserts. With
// fastTimings a pass of n1's that ran 50 ms late (the stall threshold, max(3 x
// MaintainInterval, HeartBeatInterval/2)) made n1 refuse the stop's second attempt as stalled
// for a heartbeat interval (docs/protocol.md 7.8 row 5; the pass that ends the preferred
// attempt is the one that sees the stall, 30 ms before the retry arrives), and a 300 ms gap in
// heartbeats made n1 campaign and n0 step down mid-hand-over: 3 failures in 20 runs, all of
// them the protocol doing what it says. A 1 s heartbeat interval puts the stall threshold at
// 500 ms and the detection window at 3 s; nothing the test waits for is paced by heartbeats.
func TestStopHandsOverAfterAPreferredTransferInFlight(t *testing.T) {
	peers := peersString(freePorts(t, 3))
	cfg := fastTimings()
	cfg.HeartBeatInterval = time.Second
	cfg.PreferredLeaderIDs = []string{"n1"}
	start := func(id string, index int64) *Server {
		s, err := New(Config{Keys: testKeys, Group: "g", SelfID: id, Peers: peers, DataDir: t.TempDir(), Election: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateLedger(1, index); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Stop(ctx)
		})
		return s
	}
	n0, n1 := start("n0", 500), start("n1", 400)
	poll := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(electionLimit); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited %v for %s; n0 %+v", electionLimit, what, n0.Status())
			}
		}
	}
	poll("n0 to lead with a preferred hand-over to n1 in flight", func() bool {
		st := n0.Status()
		return st.Role == protocol.LEADER && st.TransferringTo == "n1"
	})
	term := n0.Status().Term
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- n0.Stop(ctx)
	}()
	// Once the preferred attempt has failed, n1 catches up, so the stop's retry can succeed.
	poll("the preferred attempt to fail", func() bool {
		select {
		case err := <-stopped:
			stopped <- err
			return true
		default:
		}
		return counterValue(t, n0.solo.gatherer, "dledger_leadership_transfers_total", "result", "TAKE_LEADERSHIP_FAILED") >= 1
	})
	if err := n1.UpdateLedger(1, 500); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if st := n1.Status(); st.Role != protocol.LEADER || st.Term != term+1 {
		t.Fatalf("when Stop returned n1 was %v at term %d; want the hand-over to have made it leader at %d", st.Role, st.Term, term+1)
	}
}

// TestServerFitsItsAllocationClass: a host of 10,000 groups keeps 10,000 Servers, each rounded
// up to its allocation class. What a member of its own process has and a host's member has
// not (its rpc server, gatherer, trust, data dir store, listeners' subscriptions) and what
// only a Stop makes are behind pointers, its rpc handler is its route's (rpcHandler), and the
// start's configuration source is a byte and its warning a pointer, for the 384-byte class
// (issue 29): a host's member keeps neither until it stops, and a member of its own keeps its
// rpc server and data dir there.
func TestServerFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(Server{}); n > 384 {
		t.Fatalf("a Server is %d bytes, past the 384-byte allocation class", n)
	}
	ports := freePorts(t, 1)
	h := newTestHost(t, ports[0], t.TempDir())
	peers := fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:1;n2-127.0.0.1:2", ports[0])
	s := addStarted(t, h, "g", "n0", peers)
	if s.solo != nil || s.halt != nil {
		t.Fatalf("a started host member keeps solo parts %+v and stop state %+v", s.solo, s.halt)
	}
	if src, warning := s.ConfigurationSource(); src != "initial" || warning != "" || s.mem.warning != nil {
		t.Fatalf("a new member's configuration source %q, warning %q", src, warning)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s.halt == nil || s.Status().Role != protocol.UNKNOWN || s.Stop(ctx) != nil {
		t.Fatalf("a stopped host member: stop state %+v, status %+v", s.halt, s.Status())
	}
	solo, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Stop(ctx)
	if solo.solo == nil || solo.rpcServer() == nil || solo.solo.fileStore == nil {
		t.Fatalf("a member of its own keeps no rpc server or data dir store: %+v", solo.solo)
	}
}

// TestConfigurationSourceKept: the start's configuration source is kept as a byte and its
// warning behind a pointer (nil for none, as a host's members have); ConfigurationSource
// gives back what describeStart said, "" before New said anything.
func TestConfigurationSourceKept(t *testing.T) {
	s := &Server{}
	if src, w := s.ConfigurationSource(); src != "" || w != "" {
		t.Fatalf("before the start: %q %q", src, w)
	}
	for _, c := range []struct{ source, warning string }{{"initial", ""}, {"durable", ""}, {"durable", "contradicts"}, {"join", ""}} {
		s.mem.setStart(c.source, c.warning)
		if src, w := s.ConfigurationSource(); src != c.source || w != c.warning || (c.warning == "") != (s.mem.warning == nil) {
			t.Fatalf("kept %q %q (%v), want %q %q", src, w, s.mem.warning, c.source, c.warning)
		}
	}
}
