package dledger

import (
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// voteRound is one candidate round in flight: the tally of SPEC 6.2.
type voteRound struct {
	id       uint64
	term     int64
	deadline time.Time
	got      []bool // per member, in peer order
	answered int
	lost     int // the peer index of the leader this candidate lost at this term, or -1

	valid, accepted, notReady, biggerLedger int
	alreadyHasLeader                        bool
	knownMax                                int64
}

func (r *voteRound) tally(idx int, res protocol.VoteResult, term int64) {
	r.got[idx] = true
	r.answered++
	if res != protocol.VoteUnknown && res != protocol.VoteRejectLedgerUnknown { // both: no information
		r.valid++
	}
	switch res {
	case protocol.VoteAccept:
		r.accepted++
	case protocol.VoteRejectAlreadyHasLeader:
		r.alreadyHasLeader = true
	case protocol.VoteRejectExpiredVoteTerm, protocol.VoteRejectTermSmallThanLedger,
		// An abstaining voter grants nothing, but its term is real: ignored, a member that it
		// deposed with EXPIRED_TERM (heartbeat row 3) would win its old term again at once,
		// and again after every heartbeat round, until the ledger is reported.
		protocol.VoteRejectLedgerUnknown:
		r.knownMax = max(r.knownMax, term)
	case protocol.VoteRejectExpiredLedgerTerm, protocol.VoteRejectSmallLedgerEndIndex:
		r.biggerLedger++
	case protocol.VoteRejectTermNotReady:
		r.notReady++
	}
}

// maintainAsCandidate is the candidate pass of SPEC 6.2.
func (e *Elector) maintainAsCandidate(now time.Time) {
	if !e.ledgerKnown {
		e.abstain(now)
		return
	}
	if e.vote != nil {
		switch {
		case e.needIncreaseTerm:
			e.vote = nil // the term is moving up; this round's answers no longer matter
		case !now.Before(e.vote.deadline):
			e.decideVote(now) // D6: decided by its deadline, never by blocking
			return
		default:
			return
		}
	}
	if now.Before(e.nextTimeToRequestVote) && !e.needIncreaseTerm {
		return
	}
	term := e.ms.CurrTerm()
	if e.lastParseResult == protocol.WaitToVoteNext || e.needIncreaseTerm {
		t, err := e.ms.NextTerm()
		if err != nil {
			// Retry at the next re-vote time, not every pass: "increase immediately" bypasses
			// the schedule, so it becomes a lost round, which also moves the term up (and
			// votes) when the write succeeds.
			e.log.Error("cannot persist the next term; not campaigning", e.fields(zap.Error(err))...)
			e.needIncreaseTerm = false
			e.lastParseResult = protocol.WaitToVoteNext
			e.nextTimeToRequestVote = now.Add(e.voteDelay())
			return
		}
		term = t
		e.lastParseResult = protocol.WaitToRevote
		e.emit(now)
	}
	if e.needIncreaseTerm {
		// Adopt the higher term but cast no vote this pass, so this member can still grant the
		// candidate that made it step up when that candidate re-votes.
		e.needIncreaseTerm = false
		e.nextTimeToRequestVote = now.Add(e.voteDelay())
		return
	}
	e.startVoteRound(now, term)
}

// abstain is the candidate pass of a member that does not know its ledger yet: it starts no
// vote round (a campaign needs the ledger it would be judged by). It still adopts a higher term
// a leader's heartbeat announced (SPEC 6.4 row 7), casting no vote, so that it can follow that
// leader; a failed write is retried when the next such heartbeat comes.
func (e *Elector) abstain(now time.Time) {
	if !e.needIncreaseTerm {
		return
	}
	e.needIncreaseTerm = false
	if _, err := e.ms.NextTerm(); err != nil {
		e.log.Error("cannot persist a higher term", e.fields(zap.Error(err))...)
		return
	}
	e.emit(now)
}

func (e *Elector) startVoteRound(now time.Time, term int64) {
	peers := e.ms.Peers()
	ledger := e.ms.Ledger()
	e.roundSeq++
	r := &voteRound{
		id:       e.roundSeq,
		term:     term,
		deadline: now.Add(e.cfg.VoteRoundBase + time.Duration(e.rnd.Int63n(int64(e.cfg.MaxVoteInterval)))),
		got:      make([]bool, len(peers)),
		knownMax: -1,
		lost:     -1,
	}
	for i, p := range peers {
		if p.ID == e.lostLeader && term == e.lostTerm && p.ID != e.ms.SelfID() {
			r.lost = i
		}
	}
	e.vote = r
	e.log.Debug("requests votes", e.fields(zap.Int64("ledgerEndTerm", ledger.Term), zap.Int64("ledgerEndIndex", ledger.Index))...)
	for i, p := range peers {
		req := &protocol.VoteRequest{
			Header: protocol.Header{Group: e.ms.Group(), RemoteID: p.ID, LocalID: e.ms.SelfID(),
				LeaderID: e.ms.SelfID(), Term: term},
			LedgerEndTerm: ledger.Term, LedgerEndIndex: ledger.Index,
		}
		if p.ID == e.ms.SelfID() {
			resp := e.handleVoteLocked(req, true, now)
			r.tally(i, e.brokenResult(voteResultOf(resp, nil)), resp.Term)
			continue
		}
		idx, id := i, r.id
		e.later(func() {
			e.tr.SendVote(req.RemoteID, req, func(resp *protocol.VoteResponse, err error) {
				e.onVoteResponse(id, idx, resp, err)
			})
		})
	}
	if e.vote == r && e.canDecideEarly(r) {
		e.decideVote(now)
	}
}

func voteResultOf(resp *protocol.VoteResponse, err error) protocol.VoteResult {
	if err != nil || resp == nil || resp.Code != protocol.CodeSuccess {
		return protocol.VoteUnknown
	}
	return resp.VoteResult
}

func (e *Elector) onVoteResponse(roundID uint64, idx int, resp *protocol.VoteResponse, err error) {
	e.mu.Lock()
	defer e.unlock()
	res := voteResultOf(resp, err)
	e.obs.VoteResponse(res)
	r := e.vote
	if r == nil || r.id != roundID || r.got[idx] {
		return // a late answer to a round already decided or abandoned
	}
	var term int64
	if resp != nil {
		term = resp.Term
	}
	r.tally(idx, e.brokenResult(res), term)
	if e.canDecideEarly(r) {
		e.decideVote(e.clock.Now())
	}
}

// brokenResult is res as the tally sees it: unchanged unless BrokenRules.AcceptHasLeader.
func (e *Elector) brokenResult(res protocol.VoteResult) protocol.VoteResult {
	if e.broken.AcceptHasLeader && res == protocol.VoteRejectAlreadyHasLeader {
		return protocol.VoteAccept
	}
	return res
}

// canDecideEarly holds the early-decision rules of SPEC 6.2, plus one of ours: a round at the
// term of the leader this candidate lost (the same-term probe after a follower timeout) may
// also be decided once every member but that leader has answered, in groups of 3 or more. The
// leader went silent for a whole detection window; if it has merely frozen (a stopped
// process, a long pause, a black-holed link) its socket stays open and its answer comes only
// at the round deadline, which made a silent failure cost a whole vote round more than a crash
// (BENCHMARKS.md, "pause"). Deciding without one answer is always safe: PASSED needs ACCEPTs
// counted, so an early decision can never elect anyone that waiting would not have (S1, S2,
// S4 are the voters' business). The worst it can do is settle for WAIT_TO_VOTE_NEXT where the
// lost leader's vote would have completed a quorum (it can have voted for this candidate in
// its own term, or failed to persist its self-vote): one needless term step, not a wrong
// leader. If the lost leader still leads anyone, their REJECT_ALREADY_HAS_LEADER decides the
// round first. In a 2-member group the rule would fire on the self vote alone, so it is off.
func (e *Elector) canDecideEarly(r *voteRound) bool {
	return r.alreadyHasLeader || e.ms.Quorum(r.accepted) || e.ms.Quorum(r.accepted+r.notReady) ||
		r.answered == len(r.got) ||
		(len(r.got) >= 3 && r.lost >= 0 && !r.got[r.lost] && r.answered == len(r.got)-1)
}

// neverRevote is BrokenRules.NoRevote's next vote time: far beyond any run.
var neverRevote = time.Unix(1<<40, 0)

// decideVote is the ParseResult arbitration of SPEC 6.2; the first matching rule wins.
func (e *Elector) decideVote(now time.Time) {
	r := e.vote
	e.vote = nil
	delay := e.voteDelay()
	var res protocol.ParseResult
	switch {
	case r.knownMax > r.term:
		res = protocol.WaitToVoteNext
		e.becomeCandidate(r.knownMax, now, "a voter is at a higher term")
		e.nextTimeToRequestVote = now.Add(delay)
	case r.alreadyHasLeader:
		res = protocol.WaitToRevote
		e.nextTimeToRequestVote = now.Add(delay + e.cfg.DetectionWindow())
	case !e.ms.Quorum(r.valid):
		res = protocol.WaitToRevote
		e.nextTimeToRequestVote = now.Add(delay)
	case !e.ms.Quorum(r.valid - r.biggerLedger):
		res = protocol.WaitToRevote
		e.nextTimeToRequestVote = now.Add(delay + e.cfg.MaxVoteInterval)
	case e.ms.Quorum(r.accepted):
		res = protocol.Passed
	case e.ms.Quorum(r.accepted + r.notReady):
		res = protocol.RevoteImmediately
		e.nextTimeToRequestVote = time.Time{}
	default:
		res = protocol.WaitToVoteNext
		e.nextTimeToRequestVote = now.Add(delay)
	}
	if e.broken.NoRevote && res != protocol.Passed {
		e.nextTimeToRequestVote = neverRevote
	}
	e.lastParseResult = res
	e.obs.VoteRoundDecided(res)
	e.log.Debug("vote round decided", e.fields(zap.Int64("roundTerm", r.term), zap.Stringer("result", res),
		zap.Int("valid", r.valid), zap.Int("accepted", r.accepted), zap.Int("notReady", r.notReady),
		zap.Int("biggerLedger", r.biggerLedger), zap.Bool("alreadyHasLeader", r.alreadyHasLeader))...)
	if res == protocol.Passed && e.ms.CurrTerm() == r.term && e.ms.Role() == protocol.CANDIDATE {
		e.becomeLeader(r.term, now)
	}
}

// HandleVote answers a VoteRequest from another member (SPEC 6.1). An ACCEPT leaves only after
// the vote is durable, so this may block on fsync: never call it on a network event loop.
func (e *Elector) HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse {
	e.mu.Lock()
	defer e.unlock()
	return e.handleVoteLocked(req, false, e.clock.Now())
}

// handleVoteLocked is the decision table of SPEC 6.1; the first matching row wins. The vote is
// persisted under the lock: the decision and its durability must be one step, or two
// concurrent candidates could both be granted (S2). The disk writes under the lock are this
// one and NextTerm's (a new term must be durable before it is used); both happen only a few
// times per election, so a slow disk delays elections, never the steady state.
func (e *Elector) handleVoteLocked(req *protocol.VoteRequest, fromSelf bool, now time.Time) *protocol.VoteResponse {
	ms := e.ms
	resp := &protocol.VoteResponse{Header: protocol.Header{Group: ms.Group(), RemoteID: req.LocalID,
		LocalID: ms.SelfID(), LeaderID: ms.LeaderID(), Term: ms.CurrTerm(), Code: protocol.CodeSuccess}}
	reject := func(r protocol.VoteResult) *protocol.VoteResponse {
		resp.VoteResult = r
		return resp
	}
	my := ms.Ledger()
	cand := req.LeaderID
	switch {
	case req.Group != ms.Group(): // row 0: another group learns nothing but the code
		return &protocol.VoteResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}
	case req.RemoteID != ms.SelfID():
		resp.Code = protocol.CodeUnknownMember
		return resp
	case !ms.IsPeerMember(cand): // row 1
		return reject(protocol.VoteRejectUnknownLeader)
	case !fromSelf && cand == ms.SelfID(): // row 2
		return reject(protocol.VoteRejectUnexpectedLeader)
	case !e.ledgerKnown: // row A (ours): abstain while the ledger is unknown
		// Before the ledger rows, which would compare the candidate with a ledger this member
		// does not know (a restarted sidecar's (-1, -1) would grant a stale candidate), and
		// before every term row: an abstaining member's term and role do not move for a vote
		// request (row 8 would make it a candidate at the candidate's term). After rows 0-2,
		// which answer a misaddressed request the same whatever the member's state.
		return reject(protocol.VoteRejectLedgerUnknown)
	case !e.broken.SkipLedgerCheck && req.LedgerEndTerm < my.Term: // row 3
		return reject(protocol.VoteRejectExpiredLedgerTerm)
	case !e.broken.SkipLedgerCheck && req.LedgerEndTerm == my.Term && req.LedgerEndIndex < my.Index: // row 4
		return reject(protocol.VoteRejectSmallLedgerEndIndex)
	case req.Term < ms.CurrTerm(): // row 5
		return reject(protocol.VoteRejectExpiredVoteTerm)
	case req.Term == ms.CurrTerm() && ms.LeaderID() != "" && !e.broken.DoubleVote &&
		(ms.LeaderID() != cand || (ms.VoteFor() != "" && ms.VoteFor() != cand)): // row 6, widened
		// SPEC's row 6 needs "voted for someone else". We also refuse when this member follows
		// another leader in this term without having voted in it (it adopted the term from a
		// vote request and then heard the winner's heartbeat, as a bystander of a transfer
		// does). Granting that vote cannot elect anyone, a quorum having voted for the leader,
		// but it turns the candidate's probe into WAIT_TO_VOTE_NEXT: a restarted member would
		// start a new term and depose a healthy leader whose ledger is newer than its own.
		return reject(protocol.VoteRejectAlreadyHasLeader)
	case req.Term == ms.CurrTerm() && ms.VoteFor() != "" && ms.VoteFor() != cand && !e.broken.DoubleVote: // row 7
		return reject(protocol.VoteRejectAlreadyVoted)
	case req.Term > ms.CurrTerm(): // row 8: answer with the old term, then step up
		reject(protocol.VoteRejectTermNotReady)
		e.becomeCandidate(req.Term, now, "vote request from "+cand+" at a higher term")
		e.needIncreaseTerm = true
		return resp
	case req.Term < my.Term: // row 9
		resp.Term = my.Term
		return reject(protocol.VoteRejectTermSmallThanLedger)
	case !fromSelf && e.xfer.taking && req.LedgerEndTerm == my.Term && my.Index >= req.LedgerEndIndex: // row 10
		return reject(protocol.VoteRejectTakingLeadership)
	}
	// Row 11: grant, but only once the vote is durable.
	if err := ms.Vote(cand); err != nil {
		e.log.Error("cannot persist vote; not granting", e.fields(zap.String("candidate", cand), zap.Error(err))...)
		resp.Code = protocol.CodeInternalError
		return resp
	}
	if !fromSelf {
		e.obs.VoteGranted()
	}
	return reject(protocol.VoteAccept)
}
