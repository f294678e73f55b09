package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// errTimeout is what done receives for a call that got no answer within the rpc timeout.
var errTimeout = errors.New("sim: rpc timeout")

// errPeerDown is what done receives for a call to a member that is down (see transmit).
var errPeerDown = errors.New("sim: peer down")

// linkParams are the network conditions of a phase, the same on every link.
type linkParams struct {
	delayMin time.Duration // every message takes at least this long
	jitter   time.Duration // plus uniform [0, jitter): messages overtake each other (reordering)
	loss     float64       // probability that a message is lost
	dup      float64       // probability that a request is delivered twice
	spike    float64       // probability of a long stall, up to spikeMax (often past the timeout)
	spikeMax time.Duration
}

// calm is the network of heal phases and of the rejoin scenario: a LAN, no loss.
var calm = linkParams{delayMin: 100 * time.Microsecond, jitter: time.Millisecond}

func (p linkParams) String() string {
	return fmt.Sprintf("delay=%v+[0,%v) loss=%.2f dup=%.2f spike=%.2f<=%v", p.delayMin, p.jitter, p.loss, p.dup, p.spike, p.spikeMax)
}

// network holds the link conditions and the cut (partitioned) directed links.
type network struct {
	p       linkParams
	cut     [][]bool // cut[from][to]: messages from -> to are dropped on arrival
	timeout time.Duration
	calls   uint64
}

func newNetwork(n int, timeout time.Duration) network {
	cut := make([][]bool, n)
	for i := range cut {
		cut[i] = make([]bool, n)
	}
	return network{p: calm, cut: cut, timeout: timeout}
}

// fate draws one message's delay, or reports it lost.
func (s *sim) fate() (time.Duration, bool) {
	p := &s.net.p
	if p.loss > 0 && s.rngNet.Float64() < p.loss {
		return 0, true
	}
	d := p.delayMin
	if p.jitter > 0 {
		d += time.Duration(s.rngNet.Int64N(int64(p.jitter)))
	}
	if p.spike > 0 && s.rngNet.Float64() < p.spike {
		d += time.Duration(s.rngNet.Int64N(int64(p.spikeMax)))
	}
	return d, false
}

// blocked says why a message from -> to cannot arrive now ("" when it can).
func (s *sim) blocked(from, to *member) string {
	switch {
	case !to.up:
		return to.id + " is down"
	case s.net.cut[from.idx][to.idx]:
		return "partitioned"
	}
	return ""
}

// call is one Send: done is called exactly once, unless the sender's incarnation has crashed
// by then (that elector instance is gone, so its callback is discarded).
type call struct {
	id       uint64
	msg      msgKind
	from, to *member
	fromInc  int
	finished bool
}

func (s *sim) newCall(msg msgKind, ep *endpoint, to string, term, x, y int64) *call {
	s.net.calls++
	dst := s.member(to)
	if dst == nil {
		// The elector only sends to its peers; anything else is a bug worth stopping for.
		s.fail("SIM", "%s sent a %s to unknown member %q", ep.m.id, msgNames[msg], to)
		dst = ep.m
	}
	c := &call{id: s.net.calls, msg: msg, from: ep.m, to: dst, fromInc: ep.inc}
	if s.probing {
		s.fail("PASS", "%s sent a %s to %s from a pass run before the pass its elector planned (%v)",
			ep.m.id, msgNames[msg], to, ep.m.plannedAt)
	}
	s.tr.add(record{at: s.now, kind: rSend, msg: msg, a: int8(c.from.idx), b: int8(dst.idx), term: term, x: x, y: y, call: c.id})
	return c
}

// transmit carries one request and its response. A request to a member that is down when it
// is sent fails at once, inside Send (errPeerDown), as rpc.Client fails it: the answer's entry
// point then runs inside the elector's delivery (dledger/outbox.go). Otherwise it may be lost, delayed, duplicated (the
// handler then runs twice; the second answer is ignored, as a real client ignores an answer to
// a finished call) or dropped on arrival (the destination went down meanwhile, link cut).
// Whatever happens, the caller's done runs once: with the first response, with errPeerDown, or
// with errTimeout at send + timeout.
func transmit[Req any, Resp any](s *sim, c *call, timeout time.Duration, req Req,
	done func(Resp, error), handle func(dst *member, c *call, req Req, reply func(Resp))) {
	if !c.to.up && !s.net.cut[c.from.idx][c.to.idx] {
		// Nothing listens on the peer's port, so the rpc client holds no connection to it and
		// the call fails at once, inside Send (rpc.ErrPeerDown), not after a timeout: a crashed
		// process's sockets are closed by its kernel. Behind a cut link the sender cannot know.
		s.tr.add(record{at: s.now, kind: rDrop, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id,
			note: c.to.id + " is down: the call fails at once"})
		if s.finish(c) { // the sender is running: it is sending
			var zero Resp
			done(zero, errPeerDown)
		}
		return
	}
	expire(s, c, timeout, done)
	copies := 1
	if s.net.p.dup > 0 && s.rngNet.Float64() < s.net.p.dup {
		copies = 2
	}
	for range copies {
		d, lost := s.fate()
		if lost {
			s.tr.add(record{at: s.now, kind: rDrop, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id, note: "lost"})
			continue
		}
		s.at(d, func() {
			if why := s.blocked(c.from, c.to); why != "" {
				s.tr.add(record{at: s.now, kind: rDrop, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id, note: why})
				return
			}
			if c.to.stopped {
				c.to.held = append(c.to.held, func() { handle(c.to, c, req, func(resp Resp) { respond(s, c, resp, done) }) })
				return
			}
			handle(c.to, c, req, func(resp Resp) { respond(s, c, resp, done) })
		})
	}
}

// expire calls done with errTimeout at send + timeout, unless the call has been answered.
func expire[Resp any](s *sim, c *call, timeout time.Duration, done func(Resp, error)) {
	failAfter(s, c, timeout, errTimeout, done)
}

// failAfter calls done with err d after now, unless the call has been answered by then.
func failAfter[Resp any](s *sim, c *call, d time.Duration, err error, done func(Resp, error)) {
	s.at(d, func() {
		if !s.finish(c) {
			return
		}
		if err == errTimeout {
			s.tr.add(record{at: s.now, kind: rTimeout, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id})
		}
		var zero Resp
		if c.from.stopped {
			c.from.held = append(c.from.held, func() { done(zero, err) })
			return
		}
		s.touch(c.from)
		done(zero, err)
	})
}

// respond carries a response back to the caller.
func respond[Resp any](s *sim, c *call, resp Resp, done func(Resp, error)) {
	d, lost := s.fate()
	if lost {
		s.tr.add(record{at: s.now, kind: rRespDrop, msg: c.msg, a: int8(c.to.idx), b: int8(c.from.idx), call: c.id, note: "lost"})
		return
	}
	s.at(d, func() {
		if s.net.cut[c.to.idx][c.from.idx] {
			s.tr.add(record{at: s.now, kind: rRespDrop, msg: c.msg, a: int8(c.to.idx), b: int8(c.from.idx), call: c.id, note: "partitioned"})
			return
		}
		if !s.finish(c) {
			return
		}
		s.tr.add(record{at: s.now, kind: rResp, msg: c.msg, a: int8(c.to.idx), b: int8(c.from.idx), call: c.id})
		if c.from.stopped {
			c.from.held = append(c.from.held, func() { done(resp, nil) })
			return
		}
		s.touch(c.from)
		done(resp, nil)
	})
}

// finish marks c answered and says whether its callback should run: not if it already ran,
// and not if the sender has crashed since the send.
func (s *sim) finish(c *call) bool {
	if c.finished {
		return false
	}
	c.finished = true
	if !c.from.up || c.from.inc != c.fromInc {
		s.tr.add(record{at: s.now, kind: rDiscard, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id})
		return false
	}
	return true
}

// handleVote delivers a VoteRequest and observes the answer for S2 and S4: the voter's true
// ledger (its storage's, reported to its elector or not) is read just before the call, and an
// ACCEPT is recorded as a grant.
func (s *sim) handleVote(dst *member, c *call, req *protocol.VoteRequest, reply func(*protocol.VoteResponse)) {
	before := dst.ledger
	s.touch(dst)
	resp := s.deliverVote(dst, req)
	s.tr.add(record{at: s.now, kind: rDeliver, msg: mVote, a: int8(c.from.idx), b: int8(dst.idx), term: req.Term,
		x: int64(resp.VoteResult), y: resp.Term, call: c.id})
	if resp.Code == protocol.CodeSuccess && resp.VoteResult == protocol.VoteAccept {
		s.chk.voteGranted(dst, req, before)
	}
	reply(resp)
}

func (s *sim) handleHeartBeat(dst *member, c *call, req *protocol.HeartBeatRequest, reply func(*protocol.HeartBeatResponse)) {
	s.touch(dst)
	resp := dst.e.HandleHeartBeat(req)
	s.tr.add(record{at: s.now, kind: rDeliver, msg: mHeartBeat, a: int8(c.from.idx), b: int8(dst.idx), term: req.Term,
		x: int64(resp.Code), y: resp.Term, call: c.id})
	reply(resp)
}

// handleTransfer delivers a LeadershipTransferRequest; the transferee answers later, from one
// of its passes, through reply.
func (s *sim) handleTransfer(dst *member, c *call, req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	s.touch(dst)
	s.transferDelivered(dst)
	dst.e.HandleLeadershipTransfer(req, func(resp *protocol.LeadershipTransferResponse) {
		s.tr.add(record{at: s.now, kind: rDeliver, msg: mTransfer, a: int8(c.from.idx), b: int8(dst.idx), term: req.Term,
			x: int64(resp.Code), y: resp.Term, call: c.id})
		reply(resp)
	})
}

// ledgerOf is a VoteRequest's ledger end.
func ledgerOf(req *protocol.VoteRequest) memberstate.LedgerEnd {
	return memberstate.LedgerEnd{Term: req.LedgerEndTerm, Index: req.LedgerEndIndex}
}
