package dledger

import (
	"sync"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// The outbox: everything an Elector says to the world, in one place (the lock rule is in the
// package comment). A step running under the lock decides what to send, answer or count and
// appends it with post or observe; the entry point that took the lock delivers it with
// unlockAndDeliver, after releasing the lock, in the order it was decided. Answers come back
// through the three on*Response entry points below, which take the lock again.
//
// One delivery loop per elector at a time. A transport may complete a call synchronously, inside
// Send (rpc.Client fails a call to a peer it holds no connection to at once), and the answer's
// entry point then runs inside the delivery that made the call. It does not deliver what it
// decided itself, which would send those messages before the rest of the batch the outer
// delivery is working through, and nest one delivery in another as deep as the chain of
// synchronous answers goes: it leaves them in the outbox, and the loop that is already running
// delivers them once it has delivered everything decided before them. The same holds across
// goroutines: an entry point that finds a delivery running hands its messages to it. So the
// outbox is delivered in the order decided across steps, not only within one.

// entry is one entry of the outbox: a message, or an observation for the Observer.
type entry struct {
	msg message
	obs observation
}

// message is what an outbox entry sends or answers: a voteRequest, heartBeatRequest,
// transferRequest or transferReply.
type message interface{ isMessage() }

// voteRequest asks one member for its vote in the candidate round `round` (docs/protocol.md
// 7.2 step 5); idx is the member's place in peer order, where its answer is tallied.
type voteRequest struct {
	req   *protocol.VoteRequest
	round uint64
	idx   int
}

// heartBeatRequest is one member's heartbeat of the leader round `round`, sent at the round's
// sentAt (docs/protocol.md 7.5 step 5). It is posted by pointer, with the request in it and the
// elector its answer goes to, and its method answered is the transport's callback: one
// allocation per heartbeat sent and one for the callback, where a request, the outbox entry
// put in an interface and a closure were three (issue 29, halloc).
type heartBeatRequest struct {
	req   protocol.HeartBeatRequest
	e     *Elector
	round *heartBeatRound // its id and sentAt, which never change (the tally is read under the lock only)
	idx   int
}

// answered is the transport's callback of the heartbeat m.
func (m *heartBeatRequest) answered(resp *protocol.HeartBeatResponse, err error) {
	m.e.onHeartBeatResponse(m.round.id, m.round.sentAt, m.idx, resp, err)
}

// transferRequest asks the transferee to take leadership, for the transfer numbered seq
// (docs/protocol.md 7.8, the leader's side, row 7).
type transferRequest struct {
	req *protocol.LeadershipTransferRequest
	seq uint64
}

// transferReply is the one answer to a caller of TransferLeadership or
// HandleLeadershipTransfer.
type transferReply struct {
	reply func(*protocol.LeadershipTransferResponse)
	resp  *protocol.LeadershipTransferResponse
}

func (voteRequest) isMessage()       {}
func (*heartBeatRequest) isMessage() {}
func (transferRequest) isMessage()   {}
func (transferReply) isMessage()     {}

// post appends m to the outbox. Lock held.
func (e *Elector) post(m message) { e.outbox = append(e.openOutbox(), entry{msg: m}) }

// observe appends a count for the Observer to the outbox. Lock held.
func (e *Elector) observe(o observation) { e.outbox = append(e.openOutbox(), entry{obs: o}) }

// openOutbox is the outbox to append to: an empty one is given a spare array (spareOutboxes)
// instead of growing a new one, 1, 2, 4 entries, in every step that sends. Lock held.
func (e *Elector) openOutbox() []entry {
	if cap(e.outbox) == 0 {
		e.outbox = spareOutboxes.take()
	}
	return e.outbox
}

// spareOutboxes holds the arrays of delivered outboxes, emptied, for the next step of any
// elector of the process to fill: a step's few entries were a new array (and its growth) per
// step, some 35,000 allocations of a survivor in a 10,000-group crash (issue 29, halloc). A
// member keeps no array between steps (a host's thousands of idle members would hold one
// each), and the spares are bounded in number and size. Its mutex is also taken on the rpc
// event loop (TryHandleHeartBeat, when a heartbeat handled there posts or counts something,
// which is rare), where nothing may wait long: it is held for a slice's push or pop.
var spareOutboxes outboxSpares

// spareOutboxLen is the largest array kept (a step of a member of up to 8 peers), and
// spareOutboxes the most kept.
const (
	spareOutboxLen = 16
	spareOutboxMax = 256
)

type outboxSpares struct {
	mu    sync.Mutex
	spare [][]entry
}

// take returns an empty array, spare if one is; nil (append makes one) if none is.
func (s *outboxSpares) take() []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.spare)
	if n == 0 {
		return nil
	}
	out := s.spare[n-1]
	s.spare[n-1] = nil
	s.spare = s.spare[:n-1]
	return out
}

// give keeps out's array, emptied, for a later take; one too large, or past the bound, is
// left to the collector.
func (s *outboxSpares) give(out []entry) {
	if cap(out) == 0 || cap(out) > spareOutboxLen {
		return
	}
	clear(out) // what it sent is the transport's now, not the spare's
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.spare) < spareOutboxMax {
		s.spare = append(s.spare, out[:0])
	}
}

// unlockAndDeliver releases the lock, then delivers the outbox in order: requests to the
// transport, with the entry point their answer comes back through, answers to the callers
// waiting for them, and counts to the Observer. If a delivery is already running (this entry
// point was called from inside it, by a transport that answered synchronously, or runs beside
// it on another goroutine), that delivery takes this one's entries after the ones before them;
// otherwise this one delivers until the outbox stays empty. Every entry point that can post
// defers it right after taking the lock.
func (e *Elector) unlockAndDeliver() {
	e.deliverHeld(true)
	e.unlock() // and the answers queued meanwhile (answers.go)
}

// unlockAfterPass is unlockAndDeliver for the pass (Tick), less its plan: every driver asks
// NextPassAt right after a pass (driver.Maintainer, driver.Run, the simulator), which plans
// the next pass whatever the pass's own plan said, so that plan was computed for nothing, a
// computation of every deadline (Member.Peer queries of the host's table among them) in
// every pass. Until the driver asks, the pass that ran stays planned (due), as it did when
// the pass's plan found nothing due sooner: an entry point in between plans a pass due sooner
// still, never a later one (a due pass is never postponed). The answers queued meanwhile are
// decided and planned as after any entry point (unlock).
func (e *Elector) unlockAfterPass() {
	e.deliverHeld(false)
	e.unlock()
}

// deliverHeld is unlockAndDeliver up to the release: with the lock held on entry and on
// return, it first decides the answers queued while the lock was held (answers.go: before
// what the schedule and the campaign place are computed from), plans (if plan), then
// delivers, unless a delivery is already running, which takes the entries.
func (e *Elector) deliverHeld(plan bool) {
	e.runQueuedAnswers()
	e.endCampaign()
	if plan {
		e.noteSchedule()
	}
	if e.delivering {
		return
	}
	e.delivering = true
	defer e.deliveryPanicked() // a panicking transport or reply must not leave the loop marked running
	for len(e.outbox) > 0 {
		out := e.outbox
		e.outbox = nil
		e.mu.Unlock()
		e.deliver(out)
		spareOutboxes.give(out) // delivered: nothing refers to its entries now
		e.mu.Lock()             // the delivery loop's own: to take what was decided meanwhile
	}
	e.delivering = false
}

// unlockOnLoop is unlockAndDeliver for the one entry point that runs on the rpc server's event
// loop, the inline heartbeat (TryHandleHeartBeat, docs/protocol.md 4.5), where nothing may wait
// or call out. It releases the lock and delivers nothing: that heartbeat's answer is its return
// value, written by the loop. Whatever else is in the outbox (what the heartbeat decided
// besides its answer, such as the reply to a take it ended, and anything another goroutine
// posted) stays there, in order, for a delivery loop on another goroutine: the one running, if
// any (it takes these entries after the ones before them, as from any entry point); else the
// next entry point that delivers, and the driver's pass, which it asks for now through the
// alarm. So this entry point never becomes the delivery loop, and no other goroutine can hand
// it sends, replies, Observer counts or membership calls. Giving back the host's campaign
// place (endCampaign, which may wake another member) is left to that pass too.
func (e *Elector) unlockOnLoop() {
	e.noteSchedule()
	if (len(e.outbox) > 0 && !e.delivering || e.campaignEnds()) && !e.plannedPass.IsZero() {
		e.plan(e.clock.Now()) // without a driver, the next entry point that delivers does it
	}
	e.unlockQuiet() // answers queued while the loop held the lock go to a pass too (answers.go)
}

// deliveryPanicked, deferred by the delivery loop, clears its mark if a delivery panicked (the
// lock is released then) and lets the panic go on.
func (e *Elector) deliveryPanicked() {
	if r := recover(); r != nil {
		e.mu.Lock()
		e.delivering = false
		e.mu.Unlock()
		panic(r)
	}
}

// deliver hands out one batch of the outbox, in order, with the lock released.
func (e *Elector) deliver(out []entry) {
	for _, en := range out {
		if en.msg == nil {
			en.obs.deliver(e.obs)
			continue
		}
		switch m := en.msg.(type) {
		case voteRequest:
			e.tr.SendVote(m.req.RemoteID, m.req, func(resp *protocol.VoteResponse, err error) {
				e.onVoteResponse(m.round, m.idx, resp, err)
			})
		case *heartBeatRequest:
			e.tr.SendHeartBeat(m.req.RemoteID, &m.req, m.answered)
		case transferRequest:
			e.tr.SendLeadershipTransfer(m.req.RemoteID, m.req, func(resp *protocol.LeadershipTransferResponse, err error) {
				e.onTransferResponse(m.seq, resp, err)
			})
		case transferReply:
			m.reply(m.resp)
		case changeReply:
			m.reply(m.res)
		case membersChanged:
			m.tell(m.peers)
		case probeRequest:
			e.tr.SendVote(m.req.RemoteID, m.req, func(resp *protocol.VoteResponse, err error) {
				e.onProbeResponse(m.seq, resp, err)
			})
		}
	}
}

// onVoteResponse is the entry point of a member's answer to the vote round roundID. It never
// waits for the lock, except for an answer that teaches a configuration (answers.go).
func (e *Elector) onVoteResponse(roundID uint64, idx int, resp *protocol.VoteResponse, err error) {
	if teachesConfig(resp) {
		e.mu.Lock()
		defer e.unlockAndDeliver()
		e.runQueuedAnswers()
		e.voteAnswered(roundID, idx, resp, err)
		return
	}
	if e.answerNow() { // the closure only for a busy lock (answers.go)
		defer e.unlockAndDeliver()
		e.voteAnswered(roundID, idx, resp, err)
		return
	}
	e.answerLater(func() { e.voteAnswered(roundID, idx, resp, err) })
}

// onHeartBeatResponse is the entry point of a member's answer to the heartbeat round roundID.
// It never waits for the lock (answers.go).
func (e *Elector) onHeartBeatResponse(roundID uint64, sentAt time.Time, idx int, resp *protocol.HeartBeatResponse, err error) {
	if e.answerNow() { // the closure only for a busy lock (answers.go)
		defer e.unlockAndDeliver()
		e.heartBeatAnswered(roundID, sentAt, idx, resp, err)
		return
	}
	e.answerLater(func() { e.heartBeatAnswered(roundID, sentAt, idx, resp, err) })
}

// onTransferResponse is the entry point of the transferee's answer to the transfer seq.
func (e *Elector) onTransferResponse(seq uint64, resp *protocol.LeadershipTransferResponse, err error) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	e.transferAnswered(seq, resp, err)
}
