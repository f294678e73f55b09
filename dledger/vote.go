package dledger

import (
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// voteRound is one candidate round in flight: the tally of docs/protocol.md 7.3.
type voteRound struct {
	id       uint64
	term     int64
	deadline time.Time
	got      []bool // per member, in peer order
	answered int
	lost     int // the peer index of the leader this candidate lost at this term, or -1
	// self: this member granted itself its vote in this round (it campaigns at a term of its
	// own; a round in which each candidate got only that is a split).
	self bool
	// reached is the elector's startUp.reached when the round started (PeerReachable).
	reached uint64

	valid, accepted, notReady, biggerLedger int
	alreadyHasLeader                        bool
	knownMax                                int64
	// revotes is how many REVOTE_IMMEDIATELY rounds in a row, at this term, came before this
	// one: rule 6 (docs/protocol.md 7.4) re-votes at once at most maxImmediateRevotes times.
	revotes int
}

// maxImmediateRevotes bounds rule 6's re-votes at once in a row at one term (docs/protocol.md
// 7.4): a voter whose disk cannot take the term answers REJECT_TERM_NOT_READY every time, and
// two candidates split at one term, each refused by the other, would count their own vote and
// that answer as a quorum and re-vote at once forever. A voter whose write is only slow
// becomes ready within a few rounds.
const maxImmediateRevotes = 3

// tally counts one answer (docs/protocol.md 7.3, row by row).
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

// maintainAsCandidate is the candidate pass of docs/protocol.md 7.2, step by step.
func (e *Elector) maintainAsCandidate(now time.Time) {
	if !e.ledgerKnown || e.withdrawn || !e.campaigns() { // none campaigns (withdraw.go, membership.go)
		e.abstain(now)
		return
	}
	if e.vote != nil { // step 1: a round in flight
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
	if now.Before(e.nextTimeToRequestVote) && !e.needIncreaseTerm { // step 2
		return
	}
	if !e.needIncreaseTerm && (e.defersOnABusyHost(now) || !e.mayCampaign(now)) { // the start-up and succession orders on a busy host (7.11), the host's bound (12.6)
		return
	}
	term, ok := e.roundTerm(now) // step 3
	if !ok {
		return
	}
	if e.needIncreaseTerm { // step 4
		// Adopt the higher term but cast no vote this pass, so this member can still grant the
		// candidate that made it step up when that candidate re-votes.
		e.needIncreaseTerm = false
		e.setNextVote(now.Add(e.voteDelay()))
		return
	}
	e.startVoteRound(now, term) // step 5
}

// roundTerm is step 3 of the candidate pass: the term of the round to run. ok is false when
// the term could not be written; the pass then ends, rescheduled.
func (e *Elector) roundTerm(now time.Time) (term int64, ok bool) {
	term = e.ms.CurrTerm() // the same-term probe, unless
	if e.lastParseResult == protocol.WaitToVoteNext || e.needIncreaseTerm {
		next := e.ms.NextTermVotingForSelf // it campaigns at once (step 5): one write
		if e.needIncreaseTerm {
			next = e.ms.NextTerm // step 4 casts no vote
		}
		t, err := next()
		if err != nil {
			// Retry at the next re-vote time, not every pass: "increase immediately" bypasses
			// the schedule, so it becomes a lost round, which also moves the term up (and
			// votes) when the write succeeds.
			e.logAt(zap.ErrorLevel).Error("cannot persist the next term; not campaigning", e.fields(zap.Error(err))...)
			e.needIncreaseTerm = false
			e.lastParseResult = protocol.WaitToVoteNext
			e.setNextVote(now.Add(e.voteDelay()))
			return 0, false
		}
		term = t
		e.lastParseResult = protocol.WaitToRevote
		e.emit(now)
	}
	return term, true
}

// candidateDeadline is the candidate pass's next deadline: at once when a higher term is to be
// adopted (step 4), none while abstaining, else the deadline of the round in flight (step 1)
// or the re-vote time (step 2).
func (e *Elector) candidateDeadline(now time.Time) deadline {
	switch {
	case e.needIncreaseTerm:
		return dueAt(now)
	case !e.ledgerKnown || e.withdrawn || !e.campaigns():
		return never
	case e.vote != nil:
		return dueAt(e.vote.deadline)
	case e.gateWait && e.gateRetry.After(e.nextTimeToRequestVote) && !e.gate.Holds():
		// Refused a place: the retry, or sooner when the gate wakes it. Once a place is given
		// to it, the next pass that may campaign is the re-vote time (a grant since its refusal
		// may have moved it past now, 7.1 row 8a), where it would take that place.
		return dueAt(e.gateRetry)
	}
	return dueAt(e.nextTimeToRequestVote)
}

// mayCampaign asks the host's bound on rounds run at once (Options.Campaigns) for a place
// for the round this pass is about to start, unless none is set or this is a leadership take
// (a transfer's deadline is its own, docs/protocol.md 7.8). The place is asked for before the
// term is written (step 3), so a candidate kept waiting has not campaigned: it grants a peer
// that campaigns meanwhile, as any candidate at a lower term does (row 8a).
func (e *Elector) mayCampaign(now time.Time) bool {
	if e.gate == nil || e.take.campaigning() {
		return true
	}
	longest := e.cfg.VoteRoundBase + e.cfg.MaxVoteInterval // a round's latest deadline
	e.gateAsked = true
	if e.gate.Begin(now, now.Add(longest)) {
		e.gateWait = false
		return true
	}
	e.gateWait = true
	e.gateRetry = now.Add(longest)
	// A place not given back is taken back by the first Begin after its until, and that wakes
	// no one: ask again then, or an early pass would find a place this plan did not ask for.
	if t := e.gate.RetryAt(); !t.IsZero() && t.Before(e.gateRetry) {
		e.gateRetry = t
	}
	return false
}

// endCampaign gives back the host's place (mayCampaign), or leaves its line, when the member
// has no round in flight and is not waiting for one, or is no candidate, but a leader only once
// a quorum has answered a heartbeat round of its leadership. Run at the end of every entry
// point, with the lock held.
func (e *Elector) endCampaign() {
	if e.campaignEnds() {
		e.gateAsked, e.gateWait = false, false
		e.gate.End(e.clock.Now())
	}
}

// campaignEnds says whether endCampaign gives back the place or leaves the line now. A new
// leader's election is not over when the votes are in: until its followers have answered its
// first heartbeats they do not know it leads, and in a mass election those heartbeats are
// work the host must have room for, or they come back later than the check-quorum window and
// the group elects again. Holding the place until then makes the bound count elections until
// they are settled, and its adaptation (dledger/campaign) sees how long that took; a leader
// whose quorum never answers loses the place when it runs out its time, or when it steps down.
func (e *Elector) campaignEnds() bool {
	if !e.gateAsked {
		return false
	}
	switch e.ms.Role() {
	case protocol.LEADER:
		return !e.gateSettling
	case protocol.CANDIDATE:
		return e.vote == nil && !e.gateWait && !e.revotesNow()
	}
	return true
}

// revotesNow: this candidate, a first successor whose round split (nextTermDelay), campaigns
// again at once: it keeps its place for that round instead of joining the end of the line.
func (e *Elector) revotesNow() bool {
	return e.lostAgain && e.ledgerKnown && !e.withdrawn && e.campaigns() && !e.needIncreaseTerm &&
		!e.clock.Now().Before(e.nextTimeToRequestVote)
}

// abstain is the candidate pass of a member that does not know its ledger yet: it starts no
// vote round (a campaign needs the ledger it would be judged by). It still adopts a higher term
// a leader's heartbeat announced (docs/protocol.md 7.6 row 7), casting no vote, so that it can follow that
// leader; a failed write is retried when the next such heartbeat comes.
func (e *Elector) abstain(now time.Time) {
	if !e.needIncreaseTerm {
		return
	}
	e.needIncreaseTerm = false
	if _, err := e.ms.NextTerm(); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot persist a higher term", e.fields(zap.Error(err))...)
		return
	}
	e.emit(now)
}

// startVoteRound is docs/protocol.md 7.2 step 5: the self vote at once, through handleVote, and
// a request to every other member, in peer order.
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
		reached:  e.startUp.reached,
	}
	if e.lastParseResult == protocol.RevoteImmediately && e.prevRound.term == term {
		r.revotes = e.prevRound.revotes + 1
	}
	e.prevRound.term, e.prevRound.revotes = term, r.revotes
	for i, p := range peers {
		if p.ID == e.lost.id && term == e.lost.term && p.ID != e.ms.SelfID() {
			r.lost = i
		}
	}
	e.vote = r
	if ce := e.logAt(zap.DebugLevel).Check(zap.DebugLevel, "requests votes"); ce != nil { // no fields built at info: a mass election runs thousands
		ce.Write(e.fields(zap.Int64("ledgerEndTerm", ledger.Term), zap.Int64("ledgerEndIndex", ledger.Index))...)
	}
	for i, p := range peers {
		if i >= e.ms.Voters() { // a non-voter counts in no quorum: not asked (docs/protocol.md 13)
			r.got[i] = true
			r.answered++
			continue
		}
		req := &protocol.VoteRequest{
			Header: protocol.Header{Group: e.ms.Group(), RemoteID: p.ID, LocalID: e.ms.SelfID(),
				LeaderID: e.ms.SelfID(), Term: term},
			LedgerEndTerm: ledger.Term, LedgerEndIndex: ledger.Index,
		}
		e.stampVoteRequest(req)
		if p.ID == e.ms.SelfID() {
			resp := e.handleVote(req, true, now)
			res := voteResultOf(resp, nil)
			r.self = res == protocol.VoteAccept
			r.tally(i, res, resp.Term)
			continue
		}
		e.post(voteRequest{req: req, round: r.id, idx: i})
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

// voteAnswered tallies member idx's answer to the round roundID (docs/protocol.md 7.3): once,
// and only in the round it was sent for.
func (e *Elector) voteAnswered(roundID uint64, idx int, resp *protocol.VoteResponse, err error) {
	res := voteResultOf(resp, err)
	e.observe(observation{kind: obsVoteResponse, arg: int64(res)})
	r := e.vote
	if r == nil || r.id != roundID || r.got[idx] {
		return // a late answer to a round already decided or abandoned
	}
	if e.learnFromVoter(resp); e.vote != r {
		return // the configuration it carried moved the member list: the round was dropped
	}
	var term int64
	if resp != nil {
		term = resp.Term
	}
	r.tally(idx, res, term)
	if e.canDecideEarly(r) {
		e.decideVote(e.clock.Now())
	}
}

// canDecideEarly holds the early-decision rules of docs/protocol.md 7.3: E1-E4 as in DLedger, and
// E5, ours: a round at the term of the leader this candidate lost (the same-term probe after a
// follower timeout) may also be decided once every member but that leader has answered, in groups
// of 3 or more. The leader went silent for a whole detection window; if it has merely frozen (a
// stopped process, a long pause, a black-holed link) its socket stays open and its answer comes
// only at the round deadline, which made a silent failure cost a whole vote round more than a
// crash (BENCHMARKS.md, "pause"). Deciding without one answer is always safe: PASSED needs ACCEPTs
// counted, so an early decision can never elect anyone that waiting would not have (S1, S2, S4 are
// the voters' business). The worst it can do is settle for WAIT_TO_VOTE_NEXT where the lost
// leader's vote would have completed a quorum (it can have voted for this candidate in its own
// term, or failed to persist its self-vote): one needless term step, not a wrong leader. If the
// lost leader still leads anyone, their REJECT_ALREADY_HAS_LEADER decides the round first. In a
// 2-member group the rule would fire on the self vote alone, so it is off; so in a group of two
// voters and any non-voters (docs/protocol.md 13: a non-voter is never asked, and counts as
// answered), which the simulator found looping on a self vote alone, never hearing the answer
// that carried a higher term.
func (e *Elector) canDecideEarly(r *voteRound) bool {
	return r.alreadyHasLeader || // E1
		e.ms.Quorum(r.accepted) || // E2
		e.ms.Quorum(r.accepted+r.notReady) || // E3
		r.answered == len(r.got) || // E4
		(e.ms.Voters() >= 3 && r.lost >= 0 && !r.got[r.lost] && r.answered == len(r.got)-1) // E5
}

// decideVote is the ParseResult arbitration of docs/protocol.md 7.4; the first matching rule
// wins.
func (e *Elector) decideVote(now time.Time) {
	r := e.vote
	e.vote = nil
	e.startUp.retry = false
	delay := e.voteDelay()
	var res protocol.ParseResult
	switch {
	case r.knownMax > r.term: // rule 1
		res = protocol.WaitToVoteNext
		e.becomeCandidate(r.knownMax, now, "a voter is at a higher term")
		e.setNextVote(now.Add(delay))
	case r.alreadyHasLeader: // rule 2
		res = protocol.WaitToRevote
		e.setNextVote(e.stickyRetry(r, now, delay))
	case !e.ms.Quorum(r.valid): // rule 3
		res = protocol.WaitToRevote
		if e.startingUp(now) && e.startupRank() == 0 {
			e.retryStartUp(r, now)
			break
		}
		e.setNextVote(now.Add(delay))
	case !e.ms.Quorum(r.valid - r.biggerLedger): // rule 4
		res = protocol.WaitToRevote
		e.setNextVote(now.Add(delay + e.cfg.MaxVoteInterval))
	case e.ms.Quorum(r.accepted): // rule 5
		res = protocol.Passed
	case e.ms.Quorum(r.accepted+r.notReady) && r.revotes < maxImmediateRevotes: // rule 6
		res = protocol.RevoteImmediately
		e.setNextVote(time.Time{})
	default: // rule 7
		res = protocol.WaitToVoteNext
		e.planNextTerm(r, now, delay)
	}
	e.lastParseResult = res
	e.observe(observation{kind: obsVoteRoundDecided, arg: int64(res)})
	if ce := e.logAt(zap.DebugLevel).Check(zap.DebugLevel, "vote round decided"); ce != nil {
		ce.Write(e.fields(zap.Int64("roundTerm", r.term), zap.Stringer("result", res),
			zap.Int("valid", r.valid), zap.Int("accepted", r.accepted), zap.Int("notReady", r.notReady),
			zap.Int("biggerLedger", r.biggerLedger), zap.Bool("alreadyHasLeader", r.alreadyHasLeader))...)
	}
	if res == protocol.Passed && e.ms.CurrTerm() == r.term && e.ms.Role() == protocol.CANDIDATE {
		e.becomeLeader(r.term, now)
	}
}

// planNextTerm plans the next term after a lost round: after nextTermDelay; a first successor
// that goes at once keeps its place (lostAgain), a later one's slot may be deferred on a busy
// host (succession.defers, successionDefers).
func (e *Elector) planNextTerm(r *voteRound, now time.Time, delay time.Duration) {
	d, ordered := e.nextTermDelay(r, delay)
	e.setNextVote(now.Add(d))
	e.lostAgain = ordered && d == 0
	if ordered {
		e.succession.defers, e.succession.busy = e.successionSlotDefers(e.lost.id), true
	}
}

// nextTermDelay is rule 7's wait before the next term (docs/protocol.md 7.4, 7.11): in
// succession order after the probe that followed the loss of a leader (r.lost), and after a
// split round at the first term after that leader's (each candidate got its own vote and too
// few others), else delay, the ordinary random one. In succession order the first successor
// goes at once, and then keeps its place in the host's bound for that round (lostAgain,
// campaignEnds): waiting in line behind the other groups' first rounds cost a split group most
// of a second.
func (e *Elector) nextTermDelay(r *voteRound, delay time.Duration) (d time.Duration, ordered bool) {
	split := r.self && e.lost.id != "" && r.term == e.lost.term+1
	if r.lost < 0 && !split {
		return delay, false
	}
	return e.successionDelay(e.lost.id), true
}

// row 8: a candidate at a higher term (docs/protocol.md 7.1, rows 8a and 8b). The voter steps
// up to the candidate's term as a candidate. Row 8a (ours): if rows 9-11 would grant at the new
// term, it adopts the term and grants in one durable write, and answers at once. DLedger answers
// TERM_NOT_READY, adopts the term in its next pass and grants only when the candidate asks
// again: two more passes and a round trip on every election and transfer. Row 8b: otherwise,
// or if the write fails, it answers with the old term and the next pass adopts the new one
// without voting. resp is the answer as the table started it.
func (e *Elector) voteAtHigherTerm(req *protocol.VoteRequest, resp *protocol.VoteResponse, now time.Time) *protocol.VoteResponse {
	ms, my, cand := e.ms, e.ms.Ledger(), req.LeaderID
	// Rows 9 and 10 as they would answer at the new term, before stepping up ends a take.
	grant := req.Term >= my.Term && !e.takeRefuses(req)
	e.becomeCandidate(req.Term, now, voteRequestWhy(cand))
	if grant { // row 8a
		err := ms.AdoptTerm(req.Term, cand)
		if err == nil {
			e.vote = nil
			e.needIncreaseTerm = false
			// Give the candidate time to win before this member campaigns itself, and then
			// probe at the new term rather than start another (Raft resets its election timer
			// when it grants a vote, for the same reason).
			e.lastParseResult = protocol.WaitToRevote
			e.setNextVote(now.Add(e.voteDelay()))
			e.emit(now)
			e.observe(observation{kind: obsVoteGranted})
			resp.Term = req.Term
			return withResult(resp, protocol.VoteAccept)
		}
		e.logAt(zap.ErrorLevel).Error("cannot persist the new term and vote; not granting", e.fields(zap.String("candidate", cand), zap.Error(err))...)
	}
	// Row 8b: answer with the old term; the next pass adopts it without voting.
	e.needIncreaseTerm = true
	return withResult(resp, protocol.VoteRejectTermNotReady)
}

// retryStartUp: the first member of the start-up order, starting up, lost round r for want of
// answers (the start-up case of rule 3, docs/protocol.md 7.11). The others are most likely
// still starting: retry when the transport connects to one of them (PeerReachable), at once if
// one connected while this round was out (it may have been asked before), and after two passes
// at the latest.
func (e *Elector) retryStartUp(r *voteRound, now time.Time) {
	delay := 2 * e.cfg.MaintainInterval
	if e.startUp.reached != r.reached {
		delay = 0
	}
	e.setNextVote(now.Add(delay))
	e.startUp.retry = true // pending until anything sets the time again
}

// HandleVote answers a VoteRequest from another member (docs/protocol.md 7.1). An ACCEPT leaves
// only after the vote is durable, so this may block on fsync: never call it on a network event
// loop.
func (e *Elector) HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	now := e.clock.Now()
	resp := e.handleVote(req, false, now)
	e.stampVoteResponse(resp)
	e.corroborate(req, now) // adaptive.go: another member suspects this member's leader too
	return resp
}

// handleVote is the decision table of docs/protocol.md 7.1; the first matching row wins. This
// part holds rows 0 to A, the request's address and whether this member votes at all;
// voteOnLedgerAndTerm holds the rest. The vote is persisted under the lock: the decision and its
// durability must be one step, or two concurrent candidates could both be granted (S2). The disk
// writes under the lock are this one and NextTerm's (a new term must be durable before it is
// used); both happen only a few times per election, so a slow disk delays elections, never the
// steady state.
func (e *Elector) handleVote(req *protocol.VoteRequest, fromSelf bool, now time.Time) *protocol.VoteResponse {
	ms := e.ms
	resp := &protocol.VoteResponse{Header: protocol.Header{Group: ms.Group(), RemoteID: req.LocalID,
		LocalID: ms.SelfID(), LeaderID: ms.LeaderID(), Term: ms.CurrTerm(), Code: protocol.CodeSuccess}}
	cand := req.LeaderID
	switch {
	case req.Group != ms.Group(): // row 0: another group learns nothing but the code
		return &protocol.VoteResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}
	case req.RemoteID != ms.SelfID(): // row 0'
		resp.Code = protocol.CodeUnknownMember
		return resp
	case req.Probe && !fromSelf: // row P (docs/protocol.md 13.7): a forced-recovery probe moves nothing
		return probeAnswer(resp)
	case e.configRefuses(req, resp): // row C (docs/protocol.md 13.4): an older configuration
		return resp
	case !ms.IsPeerMember(cand): // row 1
		return withResult(resp, protocol.VoteRejectUnknownLeader)
	case !fromSelf && cand == ms.SelfID(): // row 2
		return withResult(resp, protocol.VoteRejectUnexpectedLeader)
	case !e.ledgerKnown || e.mem.joining: // row A (ours): abstain while the ledger is unknown, or joining (13.6)
		// Before the ledger rows, which would compare the candidate with a ledger this member
		// does not know (a restarted sidecar's (-1, -1) would grant a stale candidate), and
		// before every term row: an abstaining member's term and role do not move for a vote
		// request (row 8 would make it a candidate at the candidate's term). After rows 0-2,
		// which answer a misaddressed request the same whatever the member's state.
		return withResult(resp, protocol.VoteRejectLedgerUnknown)
	}
	return e.voteOnLedgerAndTerm(req, resp, fromSelf, now)
}

// voteOnLedgerAndTerm is the rest of the table of docs/protocol.md 7.1, rows 3 to 11: the
// candidate's ledger, then its term.
func (e *Elector) voteOnLedgerAndTerm(req *protocol.VoteRequest, resp *protocol.VoteResponse, fromSelf bool, now time.Time) *protocol.VoteResponse {
	ms := e.ms
	my := ms.Ledger()
	cand := req.LeaderID
	switch {
	case req.LedgerEndTerm < my.Term: // row 3
		return withResult(resp, protocol.VoteRejectExpiredLedgerTerm)
	case req.LedgerEndTerm == my.Term && req.LedgerEndIndex < my.Index: // row 4
		return withResult(resp, protocol.VoteRejectSmallLedgerEndIndex)
	case req.Term < ms.CurrTerm(): // row 5
		return withResult(resp, protocol.VoteRejectExpiredVoteTerm)
	case req.Term == ms.CurrTerm() && e.followsOtherThan(cand) && e.sticky(e.clock.Now()): // row 6, widened
		// DLedger's row 6 needs "voted for someone else". We also refuse when this member follows
		// another leader in this term without having voted in it (it adopted the term from a
		// vote request and then heard the winner's heartbeat, as a bystander of a transfer
		// does). Granting that vote cannot elect anyone, a quorum having voted for the leader,
		// but it turns the candidate's probe into WAIT_TO_VOTE_NEXT: a restarted member would
		// start a new term and depose a healthy leader whose ledger is newer than its own.
		return withResult(resp, protocol.VoteRejectAlreadyHasLeader)
	case e.configFences(req.Term): // row F (docs/protocol.md 13.5): a leader of this term changed members
		// After row 6: both refuse and change nothing, but a leader, and a follower defending
		// it, must say "already has a leader". A quorum of row F's "already voted" decides a
		// same-term probe by rule 7 (WAIT_TO_VOTE_NEXT), and a member restarted after a change
		// that had not yet heard the leader asked at the next term and deposed it.
		return withResult(resp, protocol.VoteRejectAlreadyVoted)
	case req.Term == ms.CurrTerm() && votedOtherThan(ms.VoteFor(), cand): // row 7
		return withResult(resp, protocol.VoteRejectAlreadyVoted)
	case req.Term > ms.CurrTerm(): // a higher term: step up (voteAtHigherTerm)
		return e.voteAtHigherTerm(req, resp, now)
	case req.Term < my.Term: // row 9
		resp.Term = my.Term
		return withResult(resp, protocol.VoteRejectTermSmallThanLedger)
	case !fromSelf && e.takeRefuses(req): // row 10
		return withResult(resp, protocol.VoteRejectTakingLeadership)
	}
	return e.grantVote(resp, cand, fromSelf)
}

// row 11: grant, but only once the vote is durable (docs/protocol.md 7.1); a failed write
// grants nothing (INTERNAL_ERROR).
func (e *Elector) grantVote(resp *protocol.VoteResponse, cand string, fromSelf bool) *protocol.VoteResponse {
	if err := e.ms.Vote(cand); err != nil {
		e.logAt(zap.ErrorLevel).Error("cannot persist vote; not granting", e.fields(zap.String("candidate", cand), zap.Error(err))...)
		resp.Code = protocol.CodeInternalError
		return resp
	}
	if !fromSelf {
		e.observe(observation{kind: obsVoteGranted})
	}
	return withResult(resp, protocol.VoteAccept)
}

// withResult sets resp's vote result and returns it.
func withResult(resp *protocol.VoteResponse, r protocol.VoteResult) *protocol.VoteResponse {
	resp.VoteResult = r
	return resp
}

// followsOtherThan: at the current term, a leader is known and it is not cand, or this member
// voted for someone other than cand. The widened row 6 refuses on it.
func (e *Elector) followsOtherThan(cand string) bool {
	leader := e.ms.LeaderID()
	return leader != "" && (leader != cand || votedOtherThan(e.ms.VoteFor(), cand))
}

// votedOtherThan: a vote was cast (voteFor) and not for cand.
func votedOtherThan(voteFor, cand string) bool { return voteFor != "" && voteFor != cand }

// takeRefuses: this member is taking leadership and the candidate's ledger is not newer than
// its own. Row 10 refuses on it, and row 8a asks it at the new term.
func (e *Elector) takeRefuses(req *protocol.VoteRequest) bool {
	my := e.ms.Ledger()
	return e.take.campaigning() && req.LedgerEndTerm == my.Term && my.Index >= req.LedgerEndIndex
}

// voteRequestWhy is why a member steps up to a candidate's higher term (row 8). becomeCandidate
// compares it with the transferee's, to tell a leader's planned hand-over from a step-down.
func voteRequestWhy(cand string) string { return "vote request from " + cand + " at a higher term" }
