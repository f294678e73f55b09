package dledger

import (
	"sync"
	"sync/atomic"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Answers that find the elector busy (docs/protocol.md 4.5, "An answer never waits for its
// member's lock").
//
// A transport calls an answer's entry point on whatever goroutine completes the call, and the
// rpc client completes calls on the goroutines of the connection they travelled on: its reader
// (an answer) and its writer (a call's timeout). On a host of many groups one connection carries
// every group's calls to a peer host. The elector's lock is held through a durable write: a
// vote granted at a higher term (HandleVote), a candidate's new term (Tick), under a group
// commit that takes as long as the disk's fdatasync and whatever other groups' writes share
// it. An entry point that waited for that lock held up every answer behind it on the
// connection, other groups' heartbeat acknowledgements included, and the writer's sweep held up
// every frame to the peer host: in a mass election new leaders stepped down for want of
// acknowledgements that had arrived (BENCHMARKS.md, "the answer's path").
//
// So the vote and heartbeat entry points take the lock only if it is free. If it is not, the
// answer is queued here and the entry point returns; the queue is handled under the lock, in
// the order the answers came (before anything else a pass or a holder's release decides; an
// entry point that takes the lock with Lock, such as HandleVote, may decide before them, as
// a network may deliver its request first), by:
//   - the goroutine that holds the lock, when it releases it at the end of an entry point
//     (unlockAndDeliver ends with unlock, which looks at the queue after releasing the lock and
//     takes it back if answers are waiting);
//   - the next answer that finds the lock free (it handles the queue first, then itself);
//   - a pass: a read-only method (Status, NextPassAt, ...), or the inline heartbeat on the
//     event loop (unlockOnLoop), that held the lock while an answer
//     was queued plans a pass at once (unlockQuiet), since it must not deliver anything itself,
//     and Tick handles the queue first.
//
// An answer is queued only after its entry point found the lock held, and looked again after
// queueing (the holder may have released it in between without seeing the answer): the holder
// then looks at the queue after its release, which comes after the answer was queued, so no
// answer stays in the queue while the lock is free. What is decided from an answer does not
// change: the same tally, at the same round, in the order the answers arrived; a heartbeat's
// acknowledgement counts its send time, as always (7.5). Only when it is decided changes, which
// the protocol allows for any answer (a network may delay it as long). A vote answer that
// carries a configuration to learn (13.4) still waits for the lock: the server wires the new
// configuration after the entry point returns (server.learningTransport), so the elector must
// have learnt it by then; such answers come only while a membership change is under way.
//
// Nothing here runs in the simulator: its transport delivers one message at a time, so the lock
// is always free when an answer comes, and every trace is unchanged.

// answerQueue holds the answers that found the lock held, each a function to run with it held.
// It is made when the first one comes, so a member that was never busy keeps one pointer.
type answerQueue struct {
	qmu     sync.Mutex
	waiting atomic.Int32 // len(q), read without qmu
	q       []func()
}

// TryLock on the entry points below is the point of them; core_test.go's lock rule lists them.

// handleAnswer runs f (an answer's handling) under the lock now if the lock is free, else queues it.
func (e *Elector) handleAnswer(f func()) {
	if e.answerNow() {
		defer e.unlockAndDeliver()
		f()
		return
	}
	e.answerLater(f)
}

// answerNow is handleAnswer's fast half, for an entry point that builds its answer's closure
// only when the lock is busy (a closure made up front is an allocation per answer, and in a
// mass election nearly every answer finds the lock free: issue 29, halloc): it takes the lock
// if it is free and handles the queued answers, and then the caller handles its own answer and
// defers unlockAndDeliver; false if the lock is held, and the caller calls answerLater.
func (e *Elector) answerNow() bool {
	if !e.mu.TryLock() {
		return false
	}
	e.runQueuedAnswers()
	return true
}

// answerNowNoting is answerNow for an entry point that may change nothing (PeerGone): decided
// says whether it handled queued answers, which may have. It is what runQueuedAnswers ran, not
// a look at the queue before: an answer queued between that look and the run (the news of
// another gone host, on another link's goroutine) was handled with nothing noting it, and a
// follower it made a candidate planned no campaign (the merge's review of hnews).
func (e *Elector) answerNowNoting() (locked, decided bool) {
	if !e.mu.TryLock() {
		return false, false
	}
	return true, e.runQueuedAnswers()
}

// unlockUnlessChanged ends an entry point that took the lock with answerNowNoting:
// unlockAndDeliver if changed (it, or the answers it handled first, changed the elector) or
// if something else is owed there (a send or a count left in the outbox, a campaign place to
// give back); else it releases the lock without re-planning. An entry point that changed
// nothing leaves every deadline where the last plan found it (schedule.go: each deadline is a
// time the elector's state names, and a change of the table's word wakes the member), so the
// plan it would compute is the plan the driver holds, or one that only postpones a pass that
// would find nothing to do. At 10,000 groups the news of a dead host re-planned every member
// of a survivor (9 % of its processor in the crash, by the lead's profile of 2026-11-28), a
// third of them followers of another host's leaders, to whom the news changes nothing.
func (e *Elector) unlockUnlessChanged(changed bool) {
	if changed || len(e.outbox) > 0 || e.campaignEnds() {
		e.unlockAndDeliver()
		return
	}
	e.unlock() // and the answers queued meanwhile
}

// answerLater is handleAnswer's slow half: it queues f, then takes the lock if it was released
// meanwhile, perhaps before the holder could see f queued.
func (e *Elector) answerLater(f func()) {
	e.queueAnswer(f)
	if e.mu.TryLock() {
		defer e.unlockAndDeliver()
		e.runQueuedAnswers()
	}
}

func (e *Elector) queueAnswer(f func()) {
	aq := e.answers.Load()
	if aq == nil {
		e.answers.CompareAndSwap(nil, &answerQueue{})
		aq = e.answers.Load()
	}
	aq.qmu.Lock()
	aq.q = append(aq.q, f)
	aq.waiting.Store(int32(len(aq.q)))
	aq.qmu.Unlock()
}

// answersWaiting says whether an answer is queued; any goroutine.
func (e *Elector) answersWaiting() bool {
	aq := e.answers.Load()
	return aq != nil && aq.waiting.Load() > 0
}

// runQueuedAnswers handles the queued answers, oldest first, and says whether there were any.
// Lock held.
func (e *Elector) runQueuedAnswers() (ran bool) {
	aq := e.answers.Load()
	for aq != nil && aq.waiting.Load() > 0 {
		aq.qmu.Lock()
		q := aq.q
		aq.q = nil
		aq.waiting.Store(0)
		aq.qmu.Unlock()
		for i, f := range q {
			f()
			q[i] = nil
			ran = true
		}
	}
	return ran
}

// unlock releases the lock at the end of an entry point's delivery; if answers were queued
// while it was held, it takes the lock back for them (unless another goroutine already has,
// which then handles them) and delivers what they decided, as often as answers keep coming
// (a loop, not a recursion: a storm of answers does not grow the stack).
func (e *Elector) unlock() {
	for {
		e.mu.Unlock()
		if !e.answersWaiting() || !e.mu.TryLock() {
			return
		}
		e.deliverHeld(true) // the queued answers first
	}
}

// unlockQuiet releases the lock for a method that must not deliver anything (a read, or the
// inline heartbeat on the network's event loop); if answers were queued while it was held, it
// plans a pass at once, which handles them (Tick). Without a driver (plannedPass zero: the
// simulator and unit tests, which tick on their own) the next entry point handles them.
func (e *Elector) unlockQuiet() {
	e.mu.Unlock()
	if e.answersWaiting() && e.mu.TryLock() {
		if !e.plannedPass.IsZero() {
			e.plan(e.clock.Now())
		}
		e.mu.Unlock()
	}
}

// teachesConfig says whether a vote answer carries a configuration the candidate may learn
// (learnFromVoter): such an answer waits for the lock (see above).
func teachesConfig(resp *protocol.VoteResponse) bool {
	return resp != nil && resp.Code == protocol.CodeSuccess && resp.VoteResult == protocol.VoteRejectExpiredConfig
}
