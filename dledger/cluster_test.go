package dledger

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// cluster is a small deterministic group for scenario tests: virtual time in 1 ms steps, a
// network that delivers after oneWay (1 ms unless a test sets it) each way (or times out when a
// link is cut or a member is down), every member ticked every MaintainInterval. No goroutines,
// no sleeps.
type cluster struct {
	t       *testing.T
	cfg     Config
	now     time.Time
	members []*member
	queue   eventQueue
	seq     uint64
	tick    time.Time          // the last StateMaintainer pass
	cut     map[[2]string]bool // directed links that drop messages
	leaders map[int64]string   // S1: every leader ever seen, by term
	seed    uint64
	oneWay  time.Duration // every message's delay
	// fromStorage starts (and restarts) members with Options.LedgerFromStorage.
	fromStorage bool
}

type member struct {
	id          string
	store       *memberstate.MemStore
	e           *Elector
	up          bool
	incarnation int
	ledger      memberstate.LedgerEnd
	// stopped models SIGSTOP: no passes, and whatever reaches the member waits in held (as in
	// its socket buffers) until resume.
	stopped bool
	held    []func()
	// unreported: the next start does not report the ledger (a restarted sidecar whose
	// application has not called PUT /v1/ledger yet).
	unreported bool
}

type eventQueue []event

type event struct {
	at  time.Time
	seq uint64
	run func()
}

const rpcTimeout = 500 * time.Millisecond

func newCluster(t *testing.T, n int, cfg Config, seed uint64) *cluster {
	start := time.Unix(2_000_000, 0)
	c := &cluster{t: t, cfg: cfg, now: start, tick: start, cut: map[[2]string]bool{},
		leaders: map[int64]string{}, seed: seed, oneWay: time.Millisecond}
	for i := 0; i < n; i++ {
		m := &member{id: fmt.Sprintf("n%d", i), store: memberstate.NewMemStore(), ledger: memberstate.EmptyLedger}
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		c.start(m)
	}
	return c
}

func (c *cluster) Now() time.Time { return c.now }

func (c *cluster) start(m *member) {
	ms, err := memberstate.New("g", m.id, peersOf(len(c.members)), m.store)
	if err != nil {
		c.t.Fatal(err)
	}
	m.incarnation++
	r := rand.New(rand.NewPCG(c.seed, uint64(m.incarnation*100+len(m.id)+int(m.id[1]))))
	m.e, err = New(c.cfg, ms, Options{Clock: c, Rand: randAdapter{r}, Transport: &clusterTransport{c: c, from: m},
		LedgerFromStorage: c.fromStorage})
	if err != nil {
		c.t.Fatal(err)
	}
	if !m.unreported {
		c.report(m)
	}
	m.unreported = false
	m.up = true
}

type randAdapter struct{ r *rand.Rand }

func (a randAdapter) Int63n(n int64) int64 { return a.r.Int64N(n) }

func (c *cluster) member(id string) *member {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	c.t.Fatalf("no member %s", id)
	return nil
}

func (c *cluster) crash(id string) {
	m := c.member(id)
	m.up = false
	m.store.Crash()
}

func (c *cluster) restart(id string) { c.start(c.member(id)) }

// report tells a member's elector its ledger, as its storage does.
func (c *cluster) report(m *member) {
	if err := m.e.UpdateLedger(m.ledger.Term, m.ledger.Index); err != nil {
		c.t.Fatal(err)
	}
}

// stop freezes a member's process (SIGSTOP).
func (c *cluster) stop(id string) { c.member(id).stopped = true }

// resume continues a stopped member (SIGCONT). With passFirst, its first pass runs before it
// reads what reached it while stopped; else after. A real process does either.
func (c *cluster) resume(id string, passFirst bool) {
	m := c.member(id)
	m.stopped = false
	if passFirst {
		m.e.Tick()
	}
	held := m.held
	m.held = nil
	for _, f := range held {
		f()
	}
}

// arrive runs f, something reaching member m, now or, while m is stopped, once it resumes.
func (c *cluster) arrive(m *member, f func()) {
	if m.stopped {
		m.held = append(m.held, f)
		return
	}
	f()
}

// isolate cuts every link to and from id.
func (c *cluster) isolate(id string, on bool) {
	for _, m := range c.members {
		if m.id != id {
			c.cut[[2]string{id, m.id}] = on
			c.cut[[2]string{m.id, id}] = on
		}
	}
}

func (c *cluster) after(d time.Duration, f func()) {
	c.seq++
	heap.Push(&c.queue, event{at: c.now.Add(d), seq: c.seq, run: f})
}

// clusterTransport delivers through the cluster's event queue. A reply reaches the sender only
// if the sender's incarnation is still the one that asked.
type clusterTransport struct {
	c    *cluster
	from *member
}

// deliver carries req to member `to` after oneWay and the reply back after oneWay more. handle
// answers through reply, possibly later (a transferee answers when its campaign ends). The
// caller's done runs once: with the reply, or with a timeout `timeout` after the send if none
// came by then (a cut link, a dead or stopped member, a slow answer), as an rpc client's.
func deliver[Req any, Resp any](t *clusterTransport, to string, req Req, timeout time.Duration,
	handle func(*Elector, Req, func(Resp)), done func(Resp, error)) {
	c, from, inc := t.c, t.from, t.from.incarnation
	finished := false
	finish := func(resp Resp, err error) {
		if finished || !from.up || from.incarnation != inc {
			return
		}
		finished = true
		c.arrive(from, func() { done(resp, err) })
	}
	var zero Resp
	c.after(timeout, func() { finish(zero, errors.New("timeout")) })
	if c.cut[[2]string{from.id, to}] {
		return
	}
	c.after(c.oneWay, func() {
		dst := c.member(to)
		if !dst.up {
			return
		}
		c.arrive(dst, func() {
			handle(dst.e, req, func(resp Resp) {
				if c.cut[[2]string{to, from.id}] {
					return
				}
				c.after(c.oneWay, func() { finish(resp, nil) })
			})
		})
	})
}

// answerAtOnce adapts a handler that answers at once.
func answerAtOnce[Req any, Resp any](h func(*Elector, Req) Resp) func(*Elector, Req, func(Resp)) {
	return func(e *Elector, req Req, reply func(Resp)) { reply(h(e, req)) }
}

func (t *clusterTransport) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	deliver(t, to, req, rpcTimeout, answerAtOnce((*Elector).HandleVote), done)
}

func (t *clusterTransport) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	deliver(t, to, req, rpcTimeout, answerAtOnce((*Elector).HandleHeartBeat), done)
}

func (t *clusterTransport) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	// The transferee answers after its own election, so this call waits longer (as the rpc
	// client's documentation asks of a real deployment).
	deliver(t, to, req, rpcTimeout+t.c.cfg.TransferBound(), (*Elector).HandleLeadershipTransfer, done)
}

// run advances virtual time by d, jumping from one event or tick to the next, and checks S1
// after each step.
func (c *cluster) run(d time.Duration) {
	end := c.now.Add(d)
	for {
		next := c.nextTick()
		if len(c.queue) > 0 && c.queue[0].at.Before(next) {
			next = c.queue[0].at
		}
		if next.After(end) {
			c.now = end
			return
		}
		c.now = next
		for len(c.queue) > 0 && !c.queue[0].at.After(c.now) {
			ev := heap.Pop(&c.queue).(event)
			ev.run()
		}
		if c.now.Equal(c.nextTick()) {
			for _, m := range c.members {
				if m.up && !m.stopped {
					m.e.Tick()
				}
			}
			c.tick = c.now
		}
		c.checkOneLeaderPerTerm()
	}
}

func (c *cluster) nextTick() time.Time { return c.tick.Add(c.cfg.MaintainInterval) }

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (c *cluster) checkOneLeaderPerTerm() {
	for _, m := range c.members {
		if !m.up {
			continue
		}
		m.e.mu.Lock()
		role, term := m.e.ms.Role(), m.e.ms.CurrTerm()
		m.e.mu.Unlock()
		if role != protocol.LEADER {
			continue
		}
		if prev, ok := c.leaders[term]; ok && prev != m.id {
			c.t.Fatalf("S1 violated: %s and %s both led term %d", prev, m.id, term)
		}
		c.leaders[term] = m.id
	}
}

// leader returns the single live leader that a quorum of live members follows, or "".
func (c *cluster) leader() (string, int64) {
	var leaders []*member
	for _, m := range c.members {
		if m.up && m.e.Status().Role == protocol.LEADER {
			leaders = append(leaders, m)
		}
	}
	if len(leaders) != 1 {
		return "", 0
	}
	st := leaders[0].e.Status()
	n := 0
	for _, m := range c.members {
		if s := m.e.Status(); m.up && s.LeaderID == st.SelfID && s.Term == st.Term {
			n++
		}
	}
	if n < memberstate.QuorumSize(len(c.members)) {
		return "", 0
	}
	return st.SelfID, st.Term
}

// awaitLeader runs until a leader with a quorum of followers exists, failing after limit.
func (c *cluster) awaitLeader(limit time.Duration) (string, int64) {
	c.t.Helper()
	for waited := time.Duration(0); waited < limit; waited += 10 * time.Millisecond {
		if id, term := c.leader(); id != "" {
			return id, term
		}
		c.run(10 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %v; statuses: %s", limit, c.describe())
	return "", 0
}

func (c *cluster) describe() string {
	s := ""
	for _, m := range c.members {
		st := m.e.Status()
		s += fmt.Sprintf("[%s up=%v %v term=%d leader=%q vote=%q] ", m.id, m.up, st.Role, st.Term, st.LeaderID, st.VoteFor)
	}
	return s
}

// electionBound is a generous bound on one election: detection plus several vote rounds.
func electionBound(cfg Config) time.Duration {
	return cfg.DetectionWindow() + 10*(cfg.MaxVoteRound()+cfg.MaxVoteInterval)
}

func TestScenarioGroupsElectExactlyOneLeader(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, profile := range Profiles() {
			for seed := uint64(1); seed <= 5; seed++ {
				t.Run(fmt.Sprintf("%d_members_%s_seed%d", n, profile, seed), func(t *testing.T) {
					cfg, _ := Profile(profile)
					c := newCluster(t, n, cfg, seed)
					id, term := c.awaitLeader(electionBound(cfg))
					// Stable: the same leader, at the same term, for many detection windows.
					c.run(5 * cfg.DetectionWindow())
					if id2, term2 := c.leader(); id2 != id || term2 != term {
						t.Fatalf("leader changed from %s@%d to %s@%d without a fault", id, term, id2, term2)
					}
					for _, m := range c.members {
						if st := m.e.Status(); st.Term != term || st.LeaderID != id {
							t.Fatalf("%s at term %d follows %q", m.id, st.Term, st.LeaderID)
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
			cfg := DefaultConfig()
			c := newCluster(t, n, cfg, 7)
			old, term := c.awaitLeader(electionBound(cfg))
			c.crash(old)
			id, term2 := c.awaitLeader(electionBound(cfg))
			if id == old || term2 <= term {
				t.Fatalf("after crashing %s@%d the leader is %s@%d", old, term, id, term2)
			}
		})
	}
}

func TestScenarioFollowersVanishLeaderStepsDownAtSameTerm(t *testing.T) {
	cfg := DefaultConfig()
	c := newCluster(t, 3, cfg, 3)
	id, term := c.awaitLeader(electionBound(cfg))
	for _, m := range c.members {
		if m.id != id {
			c.crash(m.id)
		}
	}
	c.run(cfg.DetectionWindow() + 50*time.Millisecond)
	st := c.member(id).e.Status()
	if st.Role != protocol.CANDIDATE || st.Term != term {
		t.Fatalf("lonely leader is %v at term %d, want candidate at %d", st.Role, st.Term, term)
	}
	// Alone, it keeps probing at the same term instead of inflating it.
	c.run(20 * cfg.MaxVoteRound())
	if st := c.member(id).e.Status(); st.Term != term {
		t.Fatalf("isolated ex-leader raised its term to %d", st.Term)
	}
}

func TestScenarioRestartedFollowerRejoinsWithoutLeaderChange(t *testing.T) {
	cfg := DefaultConfig()
	c := newCluster(t, 3, cfg, 11)
	id, term := c.awaitLeader(electionBound(cfg))
	var f string
	for _, m := range c.members {
		if m.id != id {
			f = m.id
			break
		}
	}
	c.crash(f)
	c.run(3 * cfg.DetectionWindow())
	c.restart(f)
	c.run(5 * cfg.DetectionWindow())
	if id2, term2 := c.leader(); id2 != id || term2 != term {
		t.Fatalf("leader went from %s@%d to %s@%d after a follower restart", id, term, id2, term2)
	}
	if st := c.member(f).e.Status(); st.Role != protocol.FOLLOWER || st.LeaderID != id {
		t.Fatalf("restarted follower is %v following %q", st.Role, st.LeaderID)
	}
}

func TestScenarioIsolatedFollowerRejoinsWithoutLeaderChange(t *testing.T) {
	cfg := DefaultConfig()
	c := newCluster(t, 3, cfg, 5)
	id, term := c.awaitLeader(electionBound(cfg))
	f := c.members[0].id
	if f == id {
		f = c.members[1].id
	}
	c.isolate(f, true)
	c.run(10 * cfg.DetectionWindow())
	c.isolate(f, false)
	c.run(5 * cfg.DetectionWindow())
	if id2, term2 := c.leader(); id2 != id || term2 != term {
		t.Fatalf("L2: leader went from %s@%d to %s@%d after a follower was cut off", id, term, id2, term2)
	}
}

func TestScenarioStaleLedgerIsNeverElected(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		cfg := DefaultConfig()
		c := newCluster(t, 3, cfg, seed)
		c.members[0].ledger = memberstate.LedgerEnd{Term: 1, Index: 50} // newer index, older term
		c.members[1].ledger = memberstate.LedgerEnd{Term: 2, Index: 10}
		c.members[2].ledger = memberstate.LedgerEnd{Term: 2, Index: 10}
		for _, m := range c.members {
			m.e.UpdateLedger(m.ledger.Term, m.ledger.Index)
		}
		id, _ := c.awaitLeader(electionBound(cfg))
		if id == "n0" {
			t.Fatalf("seed %d: the member with the stale ledger was elected", seed)
		}
		// Even when the newer members are the ones that crash one at a time, n0 cannot win with
		// one of them left: it needs that member's vote, which its ledger does not earn.
		c.crash(id)
		c.run(3 * electionBound(cfg))
		if st := c.member("n0").e.Status(); st.Role == protocol.LEADER {
			t.Fatalf("seed %d: stale n0 became leader with a newer member alive", seed)
		}
	}
}

func TestCrashBetweenPersistingAVoteAndSendingItKeepsTheVote(t *testing.T) {
	store := memberstate.NewMemStore()
	u := newUnit(t, 3, store)
	u.setTerm(4, "")
	if r := u.e.HandleVote(voteReq("n1", 4, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatal(r.VoteResult)
	}
	// The process dies before the ACCEPT leaves: the response is lost with it.
	store.Crash()
	u2 := newUnit(t, 3, store)
	if st := u2.e.Status(); st.Term != 4 || st.VoteFor != "n1" {
		t.Fatalf("restarted at term %d voteFor %q", st.Term, st.VoteFor)
	}
	if r := u2.e.HandleVote(voteReq("n2", 4, -1, -1)); r.VoteResult != protocol.VoteRejectAlreadyVoted {
		t.Fatalf("restarted member granted n2 in the same term: %v", r.VoteResult)
	}
	if r := u2.e.HandleVote(voteReq("n1", 4, -1, -1)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("re-grant to the original candidate: %v", r.VoteResult)
	}
}
