package dledger

import (
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// peerCountingLive is fakeLive counting the table's Peer queries, the work of a plan.
type peerCountingLive struct {
	*fakeLive
	mu    sync.Mutex
	peers int
}

func (c *peerCountingLive) Peer(id string, epoch uint64, since, now time.Time) (time.Time, time.Time, bool) {
	c.mu.Lock()
	c.peers++
	c.mu.Unlock()
	return c.fakeLive.Peer(id, epoch, since, now)
}

func (c *peerCountingLive) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers
}

// vouchedFollower is n0 of a 3-member group on a host with a table that vouches for its leader
// n1, driven (an alarm that records each plan), its pass planned; alarms reads the plans told.
func vouchedFollower(t *testing.T) (u *unit, live *peerCountingLive, alarms func() []time.Time) {
	t.Helper()
	u, fake := newQuietUnit(t, 3)
	live = &peerCountingLive{fakeLive: fake}
	u.e.live = live
	req := hbReq("n1", 1)
	req.Epoch = 42
	if resp := u.e.HandleHeartBeat(req); resp.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat answered %v", resp.Code)
	}
	fake.set(u.clock.Now(), u.clock.Now(), true)
	var mu sync.Mutex
	var at []time.Time
	u.e.SetPassAlarm(func(t time.Time) { mu.Lock(); at = append(at, t); mu.Unlock() })
	u.e.NextPassAt()
	return u, live, func() []time.Time { mu.Lock(); defer mu.Unlock(); return append([]time.Time(nil), at...) }
}

// TestPeerGoneThatChangesNothingPlansNothing: the news that a member's process is gone, heard
// by a follower of another member (most of a survivor's members when a host of 10,000 groups
// dies: BENCHMARKS.md, "hnews"), changes nothing, so it plans nothing: no query of the table,
// no move of the driver's alarm (unlockUnlessChanged). The follower of the member that is gone
// becomes a candidate and plans its campaign. Fails if the news that changes nothing re-plans
// (before: a plan per member told, one Peer query each, and an alarm moved later), or if the
// news that changes something does not.
func TestPeerGoneThatChangesNothingPlansNothing(t *testing.T) {
	u, live, alarms := vouchedFollower(t)
	u.clock.Advance(100 * time.Millisecond) // the later news comes goneNewsLater after the crash
	peers, plans := live.count(), len(alarms())
	u.e.PeerGone("n2")
	if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.LeaderID != "n1" {
		t.Fatalf("the news of n2 changed the follower of n1: %v, leader %q", st.Role, st.LeaderID)
	}
	if n := live.count() - peers; n != 0 {
		t.Fatalf("the news that changed nothing asked the table %d times: it re-planned", n)
	}
	if got := alarms()[plans:]; len(got) != 0 {
		t.Fatalf("the news that changed nothing moved the driver's alarm to %v", got)
	}

	u.e.PeerGone("n1") // its leader's
	if st := u.e.Status(); st.Role != protocol.CANDIDATE {
		t.Fatalf("the news of its leader left the follower %v", st.Role)
	}
	got := alarms()[plans:]
	if len(got) == 0 {
		t.Fatal("the news of its leader planned no pass")
	}
	u.e.mu.Lock()
	want := u.e.nextPassAt(u.clock.Now())
	u.e.mu.Unlock()
	if !got[len(got)-1].Equal(want) {
		t.Fatalf("the news of its leader planned %v, want the campaign's %v", got[len(got)-1], want)
	}

	plans = len(alarms())
	u.clock.Advance(time.Millisecond)
	u.e.PeerGone("n2") // a candidate: nothing to change
	if got := alarms()[plans:]; len(got) != 0 {
		t.Fatalf("the news to a candidate moved the driver's alarm to %v", got)
	}
}

// TestPeerGoneToALeaderPlans: a leader marks the member whose process is gone not alive, which
// changes its order of succession and its rounds, so the news always re-plans. Fails if the
// leader's news ends without a plan.
func TestPeerGoneToALeaderPlans(t *testing.T) {
	u, _ := quietLeaderSettled(t)
	var mu sync.Mutex
	plans := 0
	u.e.SetPassAlarm(func(time.Time) { mu.Lock(); plans++; mu.Unlock() })
	u.e.NextPassAt()
	mu.Lock()
	before := plans
	mu.Unlock()
	u.clock.Advance(time.Millisecond)
	u.e.PeerGone("n2")
	if statusOfPeer(t, u, "n2").Alive {
		t.Fatal("the leader still counts n2 alive")
	}
	u.e.mu.Lock()
	planned, want := u.e.plannedPass, u.e.nextPassAt(u.clock.Now())
	u.e.mu.Unlock()
	mu.Lock()
	n := plans - before
	mu.Unlock()
	if !planned.Equal(want) {
		t.Fatalf("after the news the leader planned %d times, at %v; want its plan %v", n, planned, want)
	}
}

// TestPeerGoneDecidesQueuedAnswersAndPlans: answers queued while another entry point held the
// lock are decided by the next entry point that takes it, the news of a gone member too; the
// news changes nothing itself (the candidate stays a candidate), but the answers did (they lost
// the round, which sets the re-vote time, and leave a count for the Observer), so it plans.
// A guard: the Observer's counts left in the outbox force the delivery and the plan by
// themselves, so it passes even if the queued answers did not count as a change;
// TestQueuedLeaderGoneBeforeOtherNewsPlansTheCampaign is the test that fails then.
func TestPeerGoneDecidesQueuedAnswersAndPlans(t *testing.T) {
	u, votes := candidateWithVotesOut(t)
	if len(votes) != 2 {
		t.Fatalf("%d vote requests, want 2", len(votes))
	}
	var mu sync.Mutex
	var alarms []time.Time
	u.e.SetPassAlarm(func(at time.Time) { mu.Lock(); alarms = append(alarms, at); mu.Unlock() })
	u.e.NextPassAt()
	u.e.mu.Lock() // as an entry point that holds it
	for _, v := range votes {
		whileHeld(t, u, "the answer", func() { v.done(voteResp(v.to, protocol.VoteRejectAlreadyVoted, v.req.Term), nil) })
	}
	u.e.mu.Unlock() // released without looking at the queue, as if by a holder that went away
	if !u.e.answersWaiting() {
		t.Fatal("precondition: the rejections were not queued")
	}
	mu.Lock()
	before := len(alarms)
	mu.Unlock()
	u.clock.Advance(time.Millisecond)
	u.e.PeerGone("n9") // no member of the group: changes nothing by itself
	st := u.e.Status()
	if st.Role != protocol.CANDIDATE || st.LastParseResult != protocol.WaitToVoteNext {
		t.Fatalf("%v, %v after the news, want a CANDIDATE waiting to vote at the next term (the queued rejections decided first)", st.Role, st.LastParseResult)
	}
	u.e.mu.Lock()
	planned, want := u.e.plannedPass, u.e.nextPassAt(u.clock.Now())
	u.e.mu.Unlock()
	mu.Lock()
	n := len(alarms) - before
	mu.Unlock()
	if n == 0 || !planned.Equal(want) {
		t.Fatalf("after the queued rejections the news planned %d times, at %v; want the candidate's plan %v", n, planned, want)
	}
}

// BenchmarkPeerGoneLaterNews is the news of a dead host as a survivor's links tell it, 100 ms
// after the crash, to the members the table did not tell first: here 10,000 followers of n1
// (a leader on another host, which the host's table vouches for), each told that n2's process
// is gone, one after another. Before unlockUnlessChanged, each re-planned (a query of the
// table, its deadlines, an alarm moved later); the news changes nothing for them.
func BenchmarkPeerGoneLaterNews(b *testing.B) {
	const n = 10000
	live := &fakeLive{changed: map[string]bool{}}
	clock := newFakeClock()
	live.set(clock.Now(), clock.Now(), true)
	es := make([]*Elector, n)
	for i := range es {
		es[i] = benchVouchedFollower(b, clock, live)
	}
	clock.Advance(100 * time.Millisecond)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%n == 0 {
			clock.Advance(time.Millisecond) // each round of news a moment later: a plan would move
		}
		es[i%n].PeerGone("n2")
	}
}

// TestAPassPlansOnce: a driver runs a pass (Tick) and then asks for the next (NextPassAt); the
// plan is computed once, by NextPassAt, not also at the end of the pass (unlockAfterPass,
// outbox.go). A vouched follower asks the table about its leader once in its pass and once per
// plan: two queries, not three. The pass that ran stays planned until NextPassAt, which plans
// the follower's next pass as before. Fails if the pass plans too (three queries per pass: in
// a 10,000-group crash, every pass of a survivor computed its plan twice).
func TestAPassPlansOnce(t *testing.T) {
	u, live, alarms := vouchedFollower(t)
	u.clock.Advance(time.Second)
	u.e.Wake() // the driver's pass, now
	plans := len(alarms())
	peers := live.count()
	u.e.Tick()
	if got := alarms()[plans:]; len(got) != 0 {
		t.Fatalf("the pass itself moved the driver's alarm to %v", got)
	}
	at := u.e.NextPassAt()
	if n := live.count() - peers; n != 2 {
		t.Fatalf("a pass and its plan asked the table %d times, want 2 (the pass's and the plan's)", n)
	}
	u.e.mu.Lock()
	want := u.e.nextPassAt(u.clock.Now())
	u.e.mu.Unlock()
	if !at.Equal(want) || at.Sub(u.clock.Now()) < u.cfg.QuietRefresh() {
		t.Fatalf("NextPassAt after the pass planned %v, want %v (a vouched follower's: QuietRefresh ahead)", at, want)
	}
	if st := u.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("the pass changed the follower: %v", st.Role)
	}
}

// BenchmarkDrivenFollowerPass is a driver's pass of a vouched follower and its plan: Tick, then
// NextPassAt, as driver.Maintainer runs every pass (before unlockAfterPass, the pass computed
// the plan too).
func BenchmarkDrivenFollowerPass(b *testing.B) {
	live := &fakeLive{changed: map[string]bool{}}
	clock := newFakeClock()
	live.set(clock.Now(), clock.Now(), true)
	e := benchVouchedFollower(b, clock, live)
	for b.Loop() {
		clock.Advance(time.Millisecond)
		e.Tick()
		e.NextPassAt()
	}
}

// TestQueuedLeaderGoneBeforeOtherNewsPlansTheCampaign: the news that a follower's leader is
// gone, queued while another entry point held the lock (another link's goroutine told it), is
// decided by the next entry point that takes the lock, here the news of a member it does not
// follow, which changes nothing by itself: the queued news made the follower a candidate, so
// that entry point must plan its campaign (the succession delay), not leave the plan a
// vouched follower had (the table's refresh, minutes away). Fails if the queued answers
// handled first do not count as a change (the merge's review of hnews).
func TestQueuedLeaderGoneBeforeOtherNewsPlansTheCampaign(t *testing.T) {
	u, _, _ := vouchedFollower(t)
	u.clock.Advance(100 * time.Millisecond)
	u.e.mu.Lock()                                              // as an entry point that holds it
	whileHeld(t, u, "the news", func() { u.e.PeerGone("n1") }) // its leader: queued behind the lock
	u.e.mu.Unlock()                                            // released without looking at the queue, as if by a holder that went away
	if !u.e.answersWaiting() {
		t.Fatal("precondition: the news was not queued")
	}
	u.e.PeerGone("n2") // a member it does not follow: no change by itself
	if st := u.e.Status(); st.Role != protocol.CANDIDATE {
		t.Fatalf("role %v after its leader's queued news, want CANDIDATE", st.Role)
	}
	u.e.mu.Lock()
	planned, want := u.e.plannedPass, u.e.nextPassAt(u.clock.Now())
	u.e.mu.Unlock()
	if !planned.Equal(want) {
		t.Fatalf("candidate's pass planned in %v, want in %v (its campaign)", planned.Sub(u.clock.Now()), want.Sub(u.clock.Now()))
	}
}

// benchVouchedFollower is a driven follower of n1 (a leader the table vouches for, epoch 42),
// for the benchmarks: its pass planned (a no-op alarm).
func benchVouchedFollower(b *testing.B, clock *dledgertest.FakeClock, live *fakeLive) *Elector {
	b.Helper()
	ms, err := memberstate.New("g", "n0", peersOf(3), memberstate.NewMemStore())
	if err != nil {
		b.Fatal(err)
	}
	e, err := newElector(testConfig(), ms, Options{Clock: clock, Rand: zeroRand, Transport: &recTransport{}, Liveness: live})
	if err != nil {
		b.Fatal(err)
	}
	e.startUp.hadLeader = true
	req := hbReq("n1", 1)
	req.Epoch = 42
	if resp := e.HandleHeartBeat(req); resp.Code != protocol.CodeSuccess {
		b.Fatalf("heartbeat answered %v", resp.Code)
	}
	e.SetPassAlarm(func(time.Time) {})
	e.NextPassAt()
	return e
}
