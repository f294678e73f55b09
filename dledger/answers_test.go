package dledger

// An answer never waits for its member's lock (answers.go): a connection's reader that carries
// many groups' answers is not held up by one group's fsync, and the answer that found the lock
// held is handled, in order, once it is free.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// gatedStore holds every save at term `from` or above until gate is closed, the first having
// said so on entered: a vote's fsync that does not end.
type gatedStore struct {
	*memberstate.MemStore
	from    int64
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) Save(d memberstate.Durable) error {
	if d.Term >= s.from {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.gate
	}
	return s.MemStore.Save(d)
}

// newGatedUnit is newUnit on a store whose saves at term `from` and above wait for the test.
func newGatedUnit(t *testing.T, from int64) (*unit, *gatedStore) {
	t.Helper()
	store := &gatedStore{MemStore: memberstate.NewMemStore(), from: from, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store.MemStore, cfg: testConfig()}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr})
	if err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	return u, store
}

// boundedWait is a generous bound on something that does not wait for a clock or a disk: a
// failure means it waited for a lock held through the gated store.
const boundedWait = 10 * time.Second

// TestOneGroupsFsyncDoesNotHoldUpAnotherGroupsAnswer (issue 29): one goroutine completes the
// calls of two groups in order, as a host link's reader does: first a vote answer of a group
// whose lock a vote handler holds through its fsync (the store's seam holds the write), then a
// heartbeat answer of another group. The second must be handled while the first group's fsync
// still waits; before, the reader waited for the lock, and every other group's answers on the
// link with it (in a mass election, new leaders stepped down for want of acknowledgements that
// had arrived). The first group's answer is handled once its fsync ends.
func TestOneGroupsFsyncDoesNotHoldUpAnotherGroupsAnswer(t *testing.T) {
	const busyTerm = 1000
	slow, store := newGatedUnit(t, busyTerm)
	slow.e.mu.Lock()
	slow.lastParse(protocol.WaitToVoteNext)
	slow.e.mu.Unlock()
	slow.clock.Advance(time.Second)
	slow.e.Tick() // a round at term 1: its write is not gated
	votes := slow.tr.takeVotes()
	if len(votes) == 0 {
		t.Fatal("the slow group's candidate asked for no vote")
	}

	fast := newUnit(t, 3, nil)
	fast.makeLeader()
	fast.tr.takeHeartBeats()
	fast.clock.Advance(fast.cfg.HeartBeatInterval)
	fast.e.Tick()
	hbs := fast.tr.takeHeartBeats()
	if len(hbs) == 0 {
		t.Fatal("the fast group's leader sent no heartbeat")
	}
	before := statusOfPeer(t, fast, hbs[0].to)
	fast.clock.Advance(time.Millisecond)

	// The slow group's lock, held through a grant's fsync at a higher term.
	voted := make(chan *protocol.VoteResponse, 1)
	go func() { voted <- slow.e.HandleVote(voteReq("n2", busyTerm, 0, 0)) }()
	select {
	case <-store.entered:
	case <-time.After(boundedWait):
		t.Fatal("the vote never reached its write")
	}

	// The link's reader: the slow group's answer, then the fast group's.
	read := make(chan struct{})
	go func() {
		votes[0].done(voteResp(votes[0].to, protocol.VoteAccept, votes[0].req.Term), nil)
		hbs[0].done(hbResp(hbs[0].to, protocol.CodeSuccess, hbs[0].req.Term), nil)
		close(read)
	}()
	select {
	case <-read:
	case <-time.After(boundedWait):
		close(store.gate)
		<-read
		t.Fatal("the link's reader waited for another group's fsync")
	}
	if after := statusOfPeer(t, fast, hbs[0].to); !after.LastAck.After(before.LastAck) {
		t.Fatalf("the fast group's acknowledgement was not counted while the slow group wrote: last ack %v (before %v)",
			after.LastAck, before.LastAck)
	}
	if !slow.e.answersWaiting() {
		t.Fatal("the slow group's answer was neither handled nor queued")
	}
	close(store.gate)
	if r := <-voted; r.VoteResult != protocol.VoteAccept {
		t.Fatalf("the vote, once written: %+v", r)
	}
	if slow.e.answersWaiting() {
		t.Fatal("the queued answer was not handled when the vote handler released the lock")
	}
}

// TestAQueuedVoteAnswerDecidesItsRound: a grant that found the candidate's lock held is
// counted once the lock is free, by the holder's release (an entry point's delivery) or by the
// next pass (a read-only holder cannot deliver): the round it completes is won.
func TestAQueuedVoteAnswerDecidesItsRound(t *testing.T) {
	for _, release := range []string{"entry point", "read, then a pass"} {
		t.Run(release, func(t *testing.T) {
			u, v := candidateWithAVoteOut(t)

			u.e.mu.Lock() // as a handler waiting for its fsync holds it
			grantWhileHeld(t, u, v)
			if st := u.ms.Role(); st != protocol.CANDIDATE {
				t.Fatalf("role %v while the answer waits", st)
			}
			switch release {
			case "entry point":
				u.e.unlockAndDeliver()
			default:
				u.e.unlockQuiet()
				if !u.e.answersWaiting() {
					t.Fatal("a read-only holder handled the answer")
				}
				u.e.Tick()
			}
			if st := u.e.Status(); st.Role != protocol.LEADER {
				t.Fatalf("role %v after the queued grant was released (%s)", st.Role, release)
			}
		})
	}
}

// TestQueuedAnswersKeepTheirOrder: answers queued while the lock is held are handled in the
// order they came, and an answer that finds the lock free after them goes after them. Two
// answers for one peer's heartbeat of one round: the round counts the first it hears (the
// second is late), so the peer is alive after them exactly when the success came first.
func TestQueuedAnswersKeepTheirOrder(t *testing.T) {
	for _, okFirst := range []bool{true, false} {
		u := newUnit(t, 3, nil)
		u.makeLeader()
		u.tr.takeHeartBeats()
		u.clock.Advance(u.cfg.HeartBeatInterval)
		u.e.Tick()
		hb := u.tr.takeHeartBeats()[0]
		fail := func() { hb.done(nil, errors.New("connection reset")) }
		ok := func() { hb.done(hbResp(hb.to, protocol.CodeSuccess, hb.req.Term), nil) }
		first, second := ok, fail
		if !okFirst {
			first, second = fail, ok
		}
		u.e.mu.Lock()
		done := make(chan struct{})
		go func() { first(); close(done) }()
		<-done // queued: it returned without the lock
		u.e.mu.Unlock()
		second() // finds the lock free: handles the queue first, then itself
		if u.e.answersWaiting() {
			t.Fatal("answers still queued after an answer took the free lock")
		}
		if alive := statusOfPeer(t, u, hb.to).Alive; alive != okFirst {
			t.Fatalf("success first %v: peer alive %v", okFirst, alive)
		}
	}
}

func statusOfPeer(t *testing.T, u *unit, id string) PeerStatus {
	t.Helper()
	for _, p := range u.e.Status().Peers {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("no peer %s in the status", id)
	return PeerStatus{}
}

// TestAnswerQueuedBehindTheInlineHeartBeatGetsAPass: the inline heartbeat on the event loop
// delivers nothing (unlockOnLoop), so an answer queued while it held the lock must not wait
// for it: unlockOnLoop looks at the queue after releasing the lock (unlockQuiet) and asks the
// driver for a pass now, and that pass decides the round. (Merging the event loop's unlock
// with the answer queue lost this once the schedule stopped planning a pass for queued answers.)
func TestAnswerQueuedBehindTheInlineHeartBeatGetsAPass(t *testing.T) {
	u, v := candidateWithAVoteOut(t)
	var mu sync.Mutex
	var alarms []time.Time
	u.e.SetPassAlarm(func(at time.Time) { mu.Lock(); alarms = append(alarms, at); mu.Unlock() })
	u.e.NextPassAt() // a driver sleeps until its pass

	u.e.mu.Lock() // as TryHandleHeartBeat holds it on the loop
	grantWhileHeld(t, u, v)
	mu.Lock()
	before := len(alarms)
	mu.Unlock()
	u.e.unlockOnLoop()
	mu.Lock()
	got := append([]time.Time(nil), alarms[before:]...)
	mu.Unlock()
	if len(got) == 0 || !got[len(got)-1].Equal(u.clock.Now()) {
		t.Fatalf("alarms after the loop's unlock %v, want one at now %v: the queued answer would wait for the next planned pass", got, u.clock.Now())
	}
	u.e.Tick() // the driver's pass
	if st := u.e.Status(); st.Role != protocol.LEADER {
		t.Fatalf("role %v after the pass, want LEADER (the queued grant)", st.Role)
	}
}

// TestQueuedAnswersHandledByTheHolderPlanNoPass: answers queued while an entry point held the
// lock are decided by that entry point's release (deliverHeld, before the schedule is
// computed), so the driver's pass stays where the elector's deadlines put it. The schedule
// used to plan a pass "now" for any queued answer, and that plan was never moved back: a pass
// for nothing, which a loaded driver running it late took for a stall of its own process
// (refusing transfers for an interval).
func TestQueuedAnswersHandledByTheHolderPlanNoPass(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	u.tr.takeHeartBeats()
	u.clock.Advance(u.cfg.HeartBeatInterval)
	u.e.Tick()
	hbs := u.tr.takeHeartBeats()
	u.e.SetPassAlarm(func(time.Time) {})
	u.e.NextPassAt() // a driver sleeps until its pass
	u.clock.Advance(time.Millisecond)
	u.e.mu.Lock() // an entry point holds it
	done := make(chan struct{})
	go func() { hbs[0].done(hbResp(hbs[0].to, protocol.CodeSuccess, hbs[0].req.Term), nil); close(done) }()
	<-done
	if !u.e.answersWaiting() {
		t.Fatal("precondition: the answer was not queued")
	}
	u.e.unlockAndDeliver()
	u.e.mu.Lock()
	planned, next, now := u.e.plannedPass, u.e.nextPassAt(u.clock.Now()), u.clock.Now()
	waiting := u.e.answersWaiting()
	u.e.mu.Unlock()
	if waiting {
		t.Fatal("the holder's release left the answer queued")
	}
	if planned.Equal(now) && next.After(now) {
		t.Fatalf("a pass planned now (%v) for answers the holder decided; the next deadline is %v", now, next)
	}
}

// candidateWithAVoteOut is a 3-member unit whose member campaigns, and its first vote request.
func candidateWithAVoteOut(t *testing.T) (*unit, sentVote) {
	t.Helper()
	u, votes := candidateWithVotesOut(t)
	return u, votes[0]
}

// candidateWithVotesOut is a 3-member unit whose member campaigns, and its vote requests.
func candidateWithVotesOut(t *testing.T) (*unit, []sentVote) {
	t.Helper()
	u := newUnit(t, 3, nil)
	u.e.mu.Lock()
	u.lastParse(protocol.WaitToVoteNext)
	u.e.mu.Unlock()
	u.clock.Advance(time.Second)
	u.e.Tick()
	return u, u.tr.takeVotes()
}

// grantWhileHeld answers v with a grant from another goroutine while the test holds the
// elector's lock, and fails if the answer waits for the lock (it must be queued).
func grantWhileHeld(t *testing.T, u *unit, v sentVote) {
	t.Helper()
	whileHeld(t, u, "the answer", func() { v.done(voteResp(v.to, protocol.VoteAccept, v.req.Term), nil) })
}

// whileHeld runs f (an entry point that must not wait for the lock) on another goroutine while
// the test holds the elector's lock, and fails if f waits for it (it must queue its work).
func whileHeld(t *testing.T, u *unit, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(boundedWait):
		u.e.mu.Unlock()
		<-done
		t.Fatal(what + " waited for the lock")
	}
}
