package dledger

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// heartBeatRound is one leader heartbeat round in flight: the tally of docs/protocol.md 7.5.
type heartBeatRound struct {
	id       uint64
	term     int64
	sentAt   time.Time
	deadline time.Time
	got      []bool
	answered int

	succ, notReady     int
	maxTerm            int64
	inconsistentLeader bool
	successors         string  // the order of succession the round carried (quiet.go)
	gotOf              [5]bool // got's array for a group of up to 5 members: one allocation less per round
}

// maintainAsLeader is the leader pass of docs/protocol.md 7.5, step by step.
func (e *Elector) maintainAsLeader(now time.Time) {
	// A leader's pass: becomeLeader made lead.
	l := e.lead
	if l.hb != nil && !now.Before(l.hb.deadline) { // step 1
		e.decideHeartBeat(now)
	}
	if e.ms.Role() != protocol.LEADER {
		return
	}
	// Step 2, check-quorum, is also tested here, not only when a round is decided, so a leader
	// whose rounds never complete still steps down on time.
	if e.lostQuorum(now) {
		e.becomeCandidate(e.ms.CurrTerm(), now, "no quorum of heartbeat acks within leak x interval")
		return
	}
	if !l.sendHeartBeatNow && now.Before(e.nextRoundAt(now)) { // step 3
		return
	}
	if l.hb != nil { // step 4
		e.decideHeartBeat(now) // the new round supersedes it; its late answers still count
		if e.ms.Role() != protocol.LEADER {
			return
		}
	}
	l.sendHeartBeatNow = false // step 5
	l.lastSendHeartBeat = now
	e.startHeartBeatRound(now)
}

// leaderDeadline is the leader pass's next deadline: the next heartbeat round (at once when one
// is asked for, step 3), the deadline of the round in flight (step 1), and the moment
// check-quorum would step down (step 2).
func (e *Elector) leaderDeadline(now time.Time) deadline {
	l := e.lead // a leader's deadline: becomeLeader made it
	d := dueAt(e.nextRoundAt(now))
	if l.sendHeartBeatNow {
		d = dueAt(now)
	}
	if l.hb != nil {
		d = earliest(d, dueAt(l.hb.deadline))
	}
	return earliest(d, e.checkQuorumDeadline(now))
}

// quorumAck is the time up to which a quorum is known to have followed this leader: the
// quorum-th newest of the members' acknowledgements, where a member's is the send time of the
// newest heartbeat round it answered SUCCESS (late answers included) and this member's own is
// now; never before the election (D3). Send times, not arrival times: a follower resets its
// own timeout when the heartbeat arrives, which is after it was sent, so this never
// overstates how recently a quorum followed. A member that is a quorum by itself is always
// acknowledged now: it never steps down for lack of acks.
func (e *Elector) quorumAck(now time.Time) time.Time {
	var buf [8]time.Time // on the stack: a group's voters, and nothing keeps them
	acks := buf[:0]
	for i, p := range e.ms.Peers()[:e.ms.Voters()] { // voters only (docs/protocol.md 13)
		if p.ID == e.ms.SelfID() {
			acks = append(acks, now)
		} else {
			acks = append(acks, e.peerAck(i, now))
		}
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return b.Compare(a) }) // newest first
	t := acks[memberstate.QuorumSize(len(acks))-1]
	if t.Before(e.lead.leaderSince) {
		t = e.lead.leaderSince
	}
	return t
}

// lostQuorum is check-quorum: no quorum has acknowledged a heartbeat sent within the
// detection window (leak x interval). With heartbeats every interval, an answer reaches the
// leader a round trip after its round was sent, so a link keeps its leader as long as the round
// trip stays below DetectionWindow - HeartBeatInterval (lan: 400 ms; dledger: 4 s), and below
// the transport's call timeout.
//
// With a host's table, a quorum the table vouches for is never lost (checkQuorumDeadline plans
// no pass then, and the two must agree: a table whose acknowledgement bound is above this
// group's check-quorum ceiling would otherwise step it down in a pass planned for something
// else).
func (e *Elector) lostQuorum(now time.Time) bool {
	return !e.quorumVouched(now) && now.After(e.quorumExpiry(now)) // adaptive.go
}

func (e *Elector) startHeartBeatRound(now time.Time) {
	peers := e.ms.Peers()
	term := e.ms.CurrTerm()
	e.roundSeq++
	r := &heartBeatRound{id: e.roundSeq, term: term, sentAt: now, deadline: now.Add(e.cfg.HeartBeatInterval), maxTerm: -1}
	r.got = r.gotOf[:min(len(peers), len(r.gotOf))]
	if len(peers) > len(r.gotOf) {
		r.got = make([]bool, len(peers))
	}
	e.lead.hb = r
	successors := e.successorOrder()
	r.successors = successors
	for i, p := range peers {
		if p.ID == e.ms.SelfID() || (e.quiet(i, successors, now) && !e.confBehind(i)) {
			r.got[i] = true
			r.answered++
			if i < e.ms.Voters() {
				r.succ++ // self counts 1, and so does a quiet follower (quiet.go); a non-voter none
			}
			continue
		}
		m := &heartBeatRequest{req: protocol.HeartBeatRequest{Header: protocol.Header{Group: e.ms.Group(), RemoteID: p.ID,
			LocalID: e.ms.SelfID(), LeaderID: e.ms.SelfID(), Term: term}, Successors: successors, Epoch: e.epoch},
			e: e, round: r, idx: i}
		e.stampHeartBeat(&m.req, i)
		e.post(m)
	}
	e.noteHeartBeatProgress(r, now)
}

// heartBeatAnswered takes the answer of member idx to the round roundID sent at sentAt. The
// round may have been decided already (a newer round replaced it, or its deadline passed): such
// a late answer still counts for check-quorum and for what the leader knows of the member, and
// a higher term in it still steps this leader down (D4). Answers to rounds of an earlier
// leadership of this member (before it stepped down, even at the same term) count for nothing.
func (e *Elector) heartBeatAnswered(roundID uint64, sentAt time.Time, idx int, resp *protocol.HeartBeatResponse, err error) {
	code := protocol.CodeNetworkError
	if err == nil && resp != nil {
		code = resp.Code
	}
	e.observe(observation{kind: obsHeartBeatResponse, arg: int64(code)})
	if e.ms.Role() != protocol.LEADER || roundID <= e.lead.leadFromRound {
		return
	}
	r := e.lead.hb
	current := r != nil && r.id == roundID
	if current && r.got[idx] {
		return // a duplicate
	}
	now := e.clock.Now()
	e.answeredAfter(idx, sentAt, now, err == nil && resp != nil) // the link's round trip (adaptive.go)
	e.peers[idx].noteAnswer(current, sentAt, now, resp, err)
	if err == nil && e.noteConfAck(idx, resp) {
		return // the configuration committed and the member list moved: the round was dropped
	}
	counted := code
	if idx >= e.ms.Voters() {
		counted = e.nonVoterAnswer(code, resp) // a non-voter counts in no quorum (docs/protocol.md 13)
	}
	if !current {
		if code == protocol.CodeExpiredTerm && resp.Term > e.ms.CurrTerm() { // D4, late
			e.becomeCandidate(resp.Term, now, "a follower is at a higher term (late heartbeat answer)")
		}
		return
	}
	e.peers[idx].quiet.note(code, sentAt, resp, r.successors)
	r.tally(idx, counted, resp)
	e.noteHeartBeatProgress(r, now)
	e.resumeTransfer(now) // a transfer may wait for this answer (quiet.go, fetchLedger)
}

// noteAnswer records what an answer (or its failure) to a round sent at sentAt tells of the
// member: alive or not, and, for SUCCESS, check-quorum's acknowledgement and its ledger. A
// failure of a round already decided changes nothing: the decision marked the member.
func (p *peerStatus) noteAnswer(current bool, sentAt, now time.Time, resp *protocol.HeartBeatResponse, err error) {
	if err != nil || resp == nil {
		if current {
			p.alive = false
		} // late: the round's decision already marked it
		return
	}
	p.alive = true
	p.lastAck = now
	p.seen.note(sentAt, resp)
	if resp.Code == protocol.CodeSuccess && !sentAt.Before(p.ackSent) {
		// The newest round answered wins: a reordered older answer carries an older ledger.
		p.ackSent = sentAt
		p.ledger = memberstate.LedgerEnd{Term: resp.LedgerEndTerm, Index: resp.LedgerEndIndex}
		p.known = !resp.LedgerUnknown // an abstaining member's ledger is no ledger at all
	}
}

// tally counts member idx's answer, with code, in the round (docs/protocol.md 7.5).
func (r *heartBeatRound) tally(idx int, code protocol.ResponseCode, resp *protocol.HeartBeatResponse) {
	r.got[idx] = true
	r.answered++
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
}

// noteHeartBeatProgress decides the round once every member has answered or a higher term is
// seen (D4: step down at once).
func (e *Elector) noteHeartBeatProgress(r *heartBeatRound, now time.Time) {
	if r.answered == len(r.got) || r.maxTerm > r.term {
		e.decideHeartBeat(now)
	}
}

// decideHeartBeat is the heartbeat arbitration of docs/protocol.md 7.5; the first matching rule
// wins.
func (e *Elector) decideHeartBeat(now time.Time) {
	r := e.lead.hb
	e.lead.hb = nil
	for i, got := range r.got {
		if !got {
			e.peers[i].alive = false // no answer within the round (a late one revives it)
			e.peers[i].quiet = quietPeer{}
		}
	}
	if e.ms.Role() != protocol.LEADER || e.ms.CurrTerm() != r.term {
		return
	}
	switch {
	case r.maxTerm > r.term: // rule 1 (D4)
		e.becomeCandidate(r.maxTerm, now, "a follower is at a higher term")
	case e.ms.Quorum(r.succ): // rule 2: the acks were recorded per member as they came
		e.gateSettling = false // its election is over (campaignEnds)
	case e.ms.Quorum(r.succ + r.notReady): // rule 3
		e.lead.sendHeartBeatNow = true
	case r.inconsistentLeader: // rule 4
		e.becomeCandidate(r.term, now, "a follower follows another leader in this term")
	case e.lostQuorum(now): // rule 5 (check-quorum)
		e.becomeCandidate(r.term, now, "no quorum of heartbeat acks within leak x interval")
	}
}

// HandleHeartBeat answers a leader's heartbeat (docs/protocol.md 7.6); the first matching row
// wins.
func (e *Elector) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	return e.handleHeartBeat(req)
}

// TryHandleHeartBeat is HandleHeartBeat for a caller that must not wait: the rpc server's
// event loop (rpc.InlineHeartBeater, docs/protocol.md 4.5). It answers only if the lock is
// free at once and the answer needs no durable write, which is every row of the table but 7a
// and 7b (a higher term is stored before the answer leaves) and a heartbeat that brings a
// configuration to store (13.3). Otherwise it returns ok false having changed nothing, and the
// caller hands the request to HandleHeartBeat. The answer is HandleHeartBeat's: which of the
// two serves a heartbeat changes when it is answered, never what the answer says. It delivers
// nothing but that answer: whatever else the heartbeat decides (the answer to a take it ended)
// and giving back a campaign place are left to a delivery on another goroutine or the driver's
// pass (unlockOnLoop), so no send, reply, Observer count or wake of another member runs on
// the loop.
func (e *Elector) TryHandleHeartBeat(req *protocol.HeartBeatRequest) (*protocol.HeartBeatResponse, bool) {
	if !e.mu.TryLock() {
		return nil, false
	}
	if e.heartBeatWrites(req) {
		e.unlockQuiet() // nothing decided, nothing to deliver (answers.go)
		return nil, false
	}
	defer e.unlockOnLoop() // delivers nothing on the loop (outbox.go): the answer is returned
	return e.handleHeartBeat(req), true
}

// heartBeatWrites says whether answering req may write to the durable store: row 7a (a higher
// term, asked of this member) or a configuration learnt from it (learnFromLeader). A request
// for another group writes nothing (row 0).
func (e *Elector) heartBeatWrites(req *protocol.HeartBeatRequest) bool {
	ms := e.ms
	if req.Group != ms.Group() {
		return false
	}
	return req.Term > ms.CurrTerm() || e.learnWouldStore(req)
}

// handleHeartBeat is HandleHeartBeat with the lock held.
func (e *Elector) handleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	now := e.clock.Now()
	ms := e.ms
	resp := &protocol.HeartBeatResponse{Header: protocol.Header{Group: ms.Group(), RemoteID: req.LocalID,
		LocalID: ms.SelfID(), LeaderID: ms.LeaderID(), Term: ms.CurrTerm()}}
	sender := req.LeaderID
	if req.Group != ms.Group() { // row 0: another group learns nothing but the code
		return &protocol.HeartBeatResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}
	}
	e.learnFromLeader(req) // docs/protocol.md 13.3: before row 1, which may need the new members
	switch {
	case req.RemoteID != ms.SelfID(): // row 0'
		resp.Code = protocol.CodeUnknownMember
	case !ms.IsPeerMember(sender): // row 1
		resp.Code = protocol.CodeUnknownMember
	case sender == ms.SelfID(): // row 2
		resp.Code = protocol.CodeUnexpectedMember
	case req.Term < ms.CurrTerm(): // row 3
		resp.Code = protocol.CodeExpiredTerm
	case req.Term == ms.CurrTerm() && ms.LeaderID() == "": // row 4
		e.becomeFollower(req.Term, sender, now)
		e.heardLeader(sender, now, true)
		e.noteSuccessors(sender, req.Successors)
		e.noteLeaderEpoch(req.Epoch, now)
		resp.Code = protocol.CodeSuccess
	case req.Term == ms.CurrTerm() && ms.LeaderID() == sender: // row 5
		e.lastLeaderHeartBeat = now
		e.heardLeader(sender, now, false)
		e.noteSuccessors(sender, req.Successors)
		e.noteLeaderEpoch(req.Epoch, now)
		resp.Code = protocol.CodeSuccess
	case req.Term == ms.CurrTerm(): // row 6: two leaders in one term would be a safety bug
		e.logAt(zap.ErrorLevel).Error("heartbeat from a second leader in this term", e.fields(
			zap.String("sender", sender), zap.String("leader", ms.LeaderID()))...)
		resp.Code = protocol.CodeInconsistentLeader
	default: // a higher term: follow the sender (followAtHigherTerm)
		e.followAtHigherTerm(req, resp, now)
	}
	resp.LeaderID = ms.LeaderID()
	l := ms.Ledger()
	resp.LedgerEndTerm, resp.LedgerEndIndex = l.Term, l.Index
	resp.LedgerUnknown = !e.ledgerKnown || e.withdrawn // either: no transfer target, no successor
	resp.Epoch = e.epoch
	e.stampHeartBeatResponse(resp)
	return resp
}

// row 7a: a heartbeat at a higher term (docs/protocol.md 7.6; ours). The member adopts the term
// (durably, without a vote) and follows the sender at once; a term has one leader, and it is
// this one. DLedger answers TERM_NOT_READY, adopts the term in its next pass and follows at the
// leader's next heartbeat, which the leader sends at once only when it lacks a quorum without
// this member; in between the member could start a pointless probe at the new term. If the
// write fails, row 7b: the member steps up as a candidate and the next pass adopts the term, as
// DLedger does.
func (e *Elector) followAtHigherTerm(req *protocol.HeartBeatRequest, resp *protocol.HeartBeatResponse, now time.Time) {
	sender := req.LeaderID
	e.becomeCandidate(req.Term, now, "heartbeat from "+sender+" at a higher term")
	err := e.ms.AdoptTerm(req.Term, "")
	if err == nil {
		e.becomeFollower(req.Term, sender, now)
		e.heardLeader(sender, now, true)
		e.noteSuccessors(sender, req.Successors)
		e.noteLeaderEpoch(req.Epoch, now)
		resp.Code = protocol.CodeSuccess
		return
	}
	e.logAt(zap.ErrorLevel).Error("cannot persist the leader's higher term", e.fields(zap.Error(err))...)
	// Row 7b: the write failed; the next pass adopts the term, as DLedger does.
	e.needIncreaseTerm = true
	resp.Code = protocol.CodeTermNotReady
}
