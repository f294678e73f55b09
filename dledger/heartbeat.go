package dledger

import (
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// heartBeatRound is one leader heartbeat round in flight: the tally of SPEC 6.3.
type heartBeatRound struct {
	id       uint64
	term     int64
	deadline time.Time
	got      []bool
	answered int

	succ, notReady     int
	maxTerm            int64
	inconsistentLeader bool
	acked              bool // quorum reached, lastQuorumAck already recorded
}

// maintainAsLeader is the leader pass of SPEC 6.3.
func (e *Elector) maintainAsLeader(now time.Time) {
	if e.hb != nil && !now.Before(e.hb.deadline) {
		e.decideHeartBeat(now)
	}
	if e.ms.Role() != protocol.LEADER {
		return
	}
	// Check-quorum is also tested here, not only when a round is decided, so a leader whose
	// rounds never complete still steps down on time.
	if now.Sub(e.lastQuorumAck) > e.cfg.DetectionWindow() {
		e.becomeCandidate(e.ms.CurrTerm(), now, "no quorum of heartbeat acks within leak x interval")
		return
	}
	if !e.sendHeartBeatNow && now.Sub(e.lastSendHeartBeat) < e.cfg.HeartBeatInterval {
		return
	}
	if e.hb != nil {
		e.decideHeartBeat(now) // the new round supersedes it
		if e.ms.Role() != protocol.LEADER {
			return
		}
	}
	e.sendHeartBeatNow = false
	e.lastSendHeartBeat = now
	e.startHeartBeatRound(now)
}

func (e *Elector) startHeartBeatRound(now time.Time) {
	peers := e.ms.Peers()
	term := e.ms.CurrTerm()
	e.roundSeq++
	r := &heartBeatRound{id: e.roundSeq, term: term, deadline: now.Add(e.cfg.HeartBeatInterval),
		got: make([]bool, len(peers)), maxTerm: -1}
	e.hb = r
	for i, p := range peers {
		if p.ID == e.ms.SelfID() {
			r.got[i] = true
			r.answered++
			r.succ++ // self counts 1
			continue
		}
		req := &protocol.HeartBeatRequest{Header: protocol.Header{Group: e.ms.Group(), RemoteID: p.ID,
			LocalID: e.ms.SelfID(), LeaderID: e.ms.SelfID(), Term: term}}
		idx, id := i, r.id
		e.later(func() {
			e.tr.SendHeartBeat(req.RemoteID, req, func(resp *protocol.HeartBeatResponse, err error) {
				e.onHeartBeatResponse(id, idx, resp, err)
			})
		})
	}
	e.noteHeartBeatProgress(r, now)
}

func (e *Elector) onHeartBeatResponse(roundID uint64, idx int, resp *protocol.HeartBeatResponse, err error) {
	e.mu.Lock()
	defer e.unlock()
	code := protocol.CodeNetworkError
	if err == nil && resp != nil {
		code = resp.Code
	}
	e.obs.HeartBeatResponse(code)
	r := e.hb
	if r == nil || r.id != roundID || r.got[idx] {
		return
	}
	now := e.clock.Now()
	r.got[idx] = true
	r.answered++
	p := &e.peers[idx]
	if err != nil || resp == nil {
		p.alive = false
	} else {
		p.alive = true
		p.lastAck = now
		if resp.Code == protocol.CodeSuccess {
			p.ledger = memberstate.LedgerEnd{Term: resp.LedgerEndTerm, Index: resp.LedgerEndIndex}
			p.known = true
		}
	}
	switch code {
	case protocol.CodeSuccess:
		r.succ++
	case protocol.CodeExpiredTerm:
		r.maxTerm = max(r.maxTerm, resp.Term)
	case protocol.CodeInconsistentLeader:
		r.inconsistentLeader = true
	case protocol.CodeTermNotReady:
		r.notReady++
	}
	e.noteHeartBeatProgress(r, now)
}

// noteHeartBeatProgress records a quorum ack as soon as there is one, and decides the round
// once every member has answered or a higher term is seen (D4: step down at once).
func (e *Elector) noteHeartBeatProgress(r *heartBeatRound, now time.Time) {
	if !r.acked && e.ms.Quorum(r.succ) {
		r.acked = true
		e.lastQuorumAck = now
	}
	if r.answered == len(r.got) || r.maxTerm > r.term {
		e.decideHeartBeat(now)
	}
}

// decideHeartBeat is the heartbeat arbitration of SPEC 6.3; the first matching row wins.
func (e *Elector) decideHeartBeat(now time.Time) {
	r := e.hb
	e.hb = nil
	for i, got := range r.got {
		if !got {
			e.peers[i].alive = false // no answer within the round
		}
	}
	if e.ms.Role() != protocol.LEADER || e.ms.CurrTerm() != r.term {
		return
	}
	switch {
	case r.maxTerm > r.term: // row 1 (D4)
		e.becomeCandidate(r.maxTerm, now, "a follower is at a higher term")
	case e.ms.Quorum(r.succ): // row 2
		if !r.acked {
			e.lastQuorumAck = now
		}
	case e.ms.Quorum(r.succ + r.notReady): // row 3
		e.sendHeartBeatNow = true
	case r.inconsistentLeader: // row 4
		e.becomeCandidate(r.term, now, "a follower follows another leader in this term")
	case now.Sub(e.lastQuorumAck) > e.cfg.DetectionWindow(): // row 5 (check-quorum)
		e.becomeCandidate(r.term, now, "no quorum of heartbeat acks within leak x interval")
	}
}

// HandleHeartBeat answers a leader's heartbeat (SPEC 6.4); the first matching row wins.
func (e *Elector) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	e.mu.Lock()
	defer e.unlock()
	now := e.clock.Now()
	ms := e.ms
	resp := &protocol.HeartBeatResponse{Header: protocol.Header{Group: ms.Group(), RemoteID: req.LocalID,
		LocalID: ms.SelfID(), LeaderID: ms.LeaderID(), Term: ms.CurrTerm()}}
	sender := req.LeaderID
	switch {
	case req.Group != ms.Group(): // row 0
		resp.Code = protocol.CodeUnknownGroup
	case req.RemoteID != ms.SelfID():
		resp.Code = protocol.CodeUnknownMember
	case !ms.IsPeerMember(sender): // row 1
		resp.Code = protocol.CodeUnknownMember
	case sender == ms.SelfID(): // row 2
		resp.Code = protocol.CodeUnexpectedMember
	case req.Term < ms.CurrTerm(): // row 3
		resp.Code = protocol.CodeExpiredTerm
	case req.Term == ms.CurrTerm() && ms.LeaderID() == "": // row 4
		e.becomeFollower(req.Term, sender, now)
		resp.Code = protocol.CodeSuccess
	case req.Term == ms.CurrTerm() && ms.LeaderID() == sender: // row 5
		e.lastLeaderHeartBeat = now
		resp.Code = protocol.CodeSuccess
	case req.Term == ms.CurrTerm(): // row 6: two leaders in one term would be a safety bug
		e.log.Error("heartbeat from a second leader in this term", e.fields(
			zap.String("sender", sender), zap.String("leader", ms.LeaderID()))...)
		resp.Code = protocol.CodeInconsistentLeader
	default: // row 7: a higher term
		e.becomeCandidate(req.Term, now, "heartbeat from "+sender+" at a higher term")
		e.needIncreaseTerm = true
		resp.Code = protocol.CodeTermNotReady
	}
	resp.LeaderID = ms.LeaderID()
	l := ms.Ledger()
	resp.LedgerEndTerm, resp.LedgerEndIndex = l.Term, l.Index
	return resp
}
