package dledger

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Leadership transfer (docs/protocol.md 7.8 and 7.9) is three small machines, each owning its
// fields and naming its own next deadline (schedule.go takes the earliest): the leader's side
// (handOver), the transferee's side (take) and the preferred-leader check (preferredCheck).
//
// Every transfer ends with exactly one answer within a bounded time: the leader's side has a
// deadline longer than the transferee's whole budget (catch-up wait plus campaign), and the
// transferee's side has its own. This is what Java DLedger lacked (issues 85, 144, 247: a
// transfer future with no timeout, and transferees left campaigning forever).

// handOver is the leader's side: a transfer in progress to `to`, asked for by asker, numbered
// seq, answered as TIMEOUT once deadline has passed.
type handOver struct {
	to       string
	seq      uint64
	deadline time.Time
	asker    asker
	// fetching: the transfer waits, before row 5, for the ledger end of a quiet `to`
	// (docs/protocol.md 12.2 rule 5), asked for at fetchFrom with the term asked for; it is
	// judged again from row 2 when the answer came, its round failed, or at fetchUntil.
	fetching              bool
	fetchTerm             int64
	fetchFrom, fetchUntil time.Time
}

// busy: a transfer is in progress. The elector keeps a handOver only while one is (nil: none),
// as a leader's transfer is rare and most members never lead.
func (h *handOver) busy() bool { return h != nil && h.to != "" }

// target is the member a transfer in progress hands over to ("" if none).
func (h *handOver) target() string {
	if !h.busy() {
		return ""
	}
	return h.to
}

// expired: the transfer's deadline has passed (the pass answers TIMEOUT).
func (h *handOver) expired(now time.Time) bool { return h.busy() && now.After(h.deadline) }

// next is the pass that answers a transfer still unanswered at its deadline.
func (h *handOver) next() deadline {
	switch {
	case !h.busy():
		return never
	case h.fetching:
		return dueAfter(h.fetchUntil)
	}
	return dueAfter(h.deadline)
}

// take is the transferee's side. waiting: accepted, waiting for the ledger to reach index.
// taking: campaigning for targetTerm with the fast vote interval (REJECT_TAKING_LEADERSHIP).
// deadline ends whichever is under way.
type take struct {
	waiting, taking bool
	index           int64
	fromTerm        int64
	targetTerm      int64
	deadline        time.Time
	from            string  // the leader that asked
	askers          []asker // one per copy of the request
}

// active: a take is under way (waiting or taking). The elector keeps a take only while one
// is (nil: none).
func (t *take) active() bool { return t != nil && (t.waiting || t.taking) }

// campaigning: a take is under way and campaigning (taking).
func (t *take) campaigning() bool { return t != nil && t.taking }

// next is the pass that moves the take on: at once while waiting if the term or role changed
// or the ledger has caught up (maintainTakeLeadership's first two cases), else once its
// deadline has passed.
func (t *take) next(ms *memberstate.MemberState, now time.Time) deadline {
	switch {
	case t == nil:
		return never
	case t.waiting && (t.interrupted(ms) || t.caughtUp(ms)):
		return dueAt(now)
	case t.active():
		return dueAfter(t.deadline)
	}
	return never
}

// interrupted: while waiting, the term or the role moved (the take fails).
func (t *take) interrupted(ms *memberstate.MemberState) bool {
	return ms.CurrTerm() != t.fromTerm || ms.Role() != protocol.FOLLOWER
}

// caughtUp: the ledger reached the index the leader asked for (the campaign begins).
func (t *take) caughtUp(ms *memberstate.MemberState) bool { return ms.Ledger().Index >= t.index }

// preferredCheck is the leader's periodic look for a better preferred leader (docs/protocol.md
// 7.9): the time of the next check, and the failed hand-overs in a row that back it off.
type preferredCheck struct {
	nextCheck time.Time
	failures  int
}

// next is the pass that makes the check, while it is on (preferredOn).
func (p *preferredCheck) next(on bool) deadline {
	if !on {
		return never
	}
	return dueAt(p.nextCheck)
}

// reset starts the checks afresh (a new leadership).
func (p *preferredCheck) reset() { *p = preferredCheck{} }

// asker is who waits for the answer to a transfer or a take: a caller, answered through the
// outbox (reply, addressed to remoteID, the asking member's id or "" for a local caller), or the
// preferred-leader check, whose outcome sets its back-off instead (docs/protocol.md 7.9).
type asker struct {
	reply    func(*protocol.LeadershipTransferResponse)
	remoteID string
	// preferred is the member the preferred-leader check hands over to, when the check asked.
	preferred string
	// fetched: the transfer already waited for the transferee's ledger end (resumeTransfer).
	fetched bool
}

// answer tells who asked how the transfer (or take) ended.
func (e *Elector) answer(who asker, r *protocol.LeadershipTransferResponse) {
	if who.preferred != "" {
		e.preferredTransferEnded(who.preferred, r.Code)
		return
	}
	r.RemoteID = who.remoteID
	e.post(transferReply{reply: who.reply, resp: r})
}

// preferredCheckInterval: the leader looks for a better preferred leader once a second.
const preferredCheckInterval = time.Second

// MaxPreferredBackoff caps the wait after failed hand-overs to a preferred leader.
const MaxPreferredBackoff = time.Minute

// preferredBackoff is the wait before the next preferred-leader check after `failures` failed
// hand-overs in a row: 2 s, 4 s, 8 s ... up to a minute. DLedger checks once a second, but a
// preferred member that cannot catch up (its ledger does not advance within
// leadershipTransferWaitTimeout) would then keep a transfer in flight almost all the time,
// and every admin transfer and the hand-over of a stopping leader would get
// LEADER_TRANSFERRING.
func preferredBackoff(failures int) time.Duration {
	return min(preferredCheckInterval<<min(failures, 6), MaxPreferredBackoff) // 2^6 s > 1 min
}

// takeBudget bounds the transferee's campaign: two of the longest vote rounds.
func (c Config) takeBudget() time.Duration { return 2 * c.MaxVoteRound() }

// TransferBound is the longest a transfer may take before its leader answers: the
// transferee's catch-up wait and campaign, plus one round of slack for the messages.
func (c Config) TransferBound() time.Duration {
	return c.LeadershipTransferWaitTimeout + c.takeBudget() + c.MaxVoteRound()
}

func (e *Elector) transferResponse(code protocol.ResponseCode) *protocol.LeadershipTransferResponse {
	return &protocol.LeadershipTransferResponse{Header: protocol.Header{Group: e.ms.Group(),
		LocalID: e.ms.SelfID(), LeaderID: e.ms.LeaderID(), Term: e.ms.CurrTerm(), Code: code}}
}

// TransferLeadership asks this member, as leader, to hand leadership to `to` (docs/protocol.md
// 7.8). term is the term the caller saw (-1: the current one). reply is called exactly once,
// outside the elector's lock, with SUCCESS and the new term, or the reason it failed.
func (e *Elector) TransferLeadership(to string, term int64, reply func(*protocol.LeadershipTransferResponse)) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	e.startTransfer(to, term, e.clock.Now(), asker{reply: reply})
}

// resumeTransfer judges a transfer that waited for its transferee's ledger end again, from row
// 2, once the ledger end is fresh, the transferee's round failed, or the wait is over
// (fetchUntil); it never waits twice.
func (e *Elector) resumeTransfer(now time.Time) {
	h := e.handOver
	if !h.busy() || !h.fetching {
		return
	}
	idx := slices.IndexFunc(e.ms.Peers(), func(p memberstate.Peer) bool { return p.ID == h.to })
	if idx >= 0 && e.ms.Role() == protocol.LEADER && e.ms.CurrTerm() == h.fetchTerm && now.Before(h.fetchUntil) &&
		e.peers[idx].alive && e.peers[idx].ackSent.Before(h.fetchFrom) {
		return // still waiting: the round asked for has not been answered yet
	}
	e.handOver = nil
	by := h.asker
	by.fetched = true
	e.startTransfer(h.to, h.fetchTerm, now, by)
}

// startTransfer is the leader's side of docs/protocol.md 7.8, its checks in the table's order.
// With a table, a quiet transferee's stale ledger end is fetched before row 5 (12.2 rule 5),
// once per request (by.fetched).
func (e *Elector) startTransfer(to string, term int64, now time.Time, by asker) {
	ms := e.ms
	if term < 0 {
		term = ms.CurrTerm()
	}
	fail := func(code protocol.ResponseCode) {
		e.observe(observation{kind: obsTransferFinished, arg: int64(code)})
		e.answer(by, e.transferResponse(code))
	}
	idx := -1
	for i, p := range ms.Peers() {
		if p.ID == to {
			idx = i
		}
	}
	switch {
	case idx < 0 || !ms.IsVoter(to): // row 1 (a non-voter is never a target: docs/protocol.md 13)
		fail(protocol.CodeUnknownMember)
		return
	case term != ms.CurrTerm(): // row 2
		fail(protocol.CodeInconsistentTerm)
		return
	case ms.Role() != protocol.LEADER: // row 3
		fail(protocol.CodeNotLeader)
		return
	case to == ms.SelfID(): // row 4
		fail(protocol.CodeSuccess) // already the leader: nothing to do
		return
	}
	if e.fetchTransfereeLedger(idx, term, now, by) {
		return
	}
	p := e.peers[idx]
	if !p.alive || !p.known || !e.closeEnough(p.ledger) { // row 5
		// A dead member, or one whose ledger we have not heard, cannot be shown to be caught up.
		fail(protocol.CodeFallBehindTooMuch)
		return
	}
	if e.handOver.busy() { // row 6
		fail(protocol.CodeLeaderTransferring)
		return
	}
	e.roundSeq++ // row 7
	e.handOver = &handOver{to: to, seq: e.roundSeq, asker: by, deadline: now.Add(e.cfg.TransferBound())}
	req := &protocol.LeadershipTransferRequest{
		Header: protocol.Header{Group: ms.Group(), RemoteID: to, LocalID: ms.SelfID(),
			LeaderID: ms.SelfID(), Term: term},
		TransferID: ms.SelfID(), TransfereeID: to, TakeLeadershipLedgerIndex: ms.Ledger().Index,
	}
	e.logAt(zap.InfoLevel).Info("transfers leadership", e.fields(zap.String("to", to), zap.Int64("takeLeadershipLedgerIndex", req.TakeLeadershipLedgerIndex))...)
	e.post(transferRequest{req: req, seq: e.roundSeq})
}

// fetchTransfereeLedger asks a quiet transferee for its ledger end and says whether it did. With
// a table a quiet follower's ledger end is as old as its last explicit heartbeat, so before
// judging it the leader fetches it (docs/protocol.md 12.2) and judges the request again when it
// comes (resumeTransfer), once per request (by.fetched); meanwhile the transfer is in progress.
func (e *Elector) fetchTransfereeLedger(idx int, term int64, now time.Time, by asker) bool {
	if by.fetched || !e.peers[idx].alive || e.handOver.busy() || !e.ledgerStale(idx, now) {
		return false
	}
	e.roundSeq++
	e.handOver = &handOver{to: e.ms.Peers()[idx].ID, seq: e.roundSeq, asker: by, deadline: now.Add(e.cfg.TransferBound()),
		fetching: true, fetchTerm: term, fetchFrom: now, fetchUntil: now.Add(e.cfg.LedgerFreshness())}
	e.fetchLedger(idx)
	return true
}

// transferAnswered takes the transferee's answer to the transfer seq.
func (e *Elector) transferAnswered(seq uint64, resp *protocol.LeadershipTransferResponse, err error) {
	if err != nil || resp == nil {
		// The request may have reached the transferee, which may still act on it: the outcome
		// is unknown, not failed (TAKE_LEADERSHIP_FAILED is the transferee's own final "no").
		e.finishTransfer(seq, protocol.CodeTimeout, nil, "no answer from the transferee")
		return
	}
	e.finishTransfer(seq, resp.Code, resp, "transferee answered")
}

// finishTransfer ends the leader-side transfer seq (if still current) with code. The caller
// learns the transferee's term and leader when it answered, else this member's view.
func (e *Elector) finishTransfer(seq uint64, code protocol.ResponseCode, answer *protocol.LeadershipTransferResponse, why string) {
	if !e.handOver.busy() || e.handOver.seq != seq {
		return
	}
	by := e.handOver.asker
	e.logAt(zap.InfoLevel).Info("transfer finished", e.fields(zap.String("to", e.handOver.to), zap.Stringer("code", code), zap.String("why", why))...)
	e.handOver = nil
	e.observe(observation{kind: obsTransferFinished, arg: int64(code)})
	r := e.transferResponse(code)
	if answer != nil {
		r.Term, r.LeaderID = answer.Term, answer.LeaderID
	}
	e.answer(by, r)
}

// HandleLeadershipTransfer serves both halves of docs/protocol.md 7.8: an admin's request to
// this member as leader (transferId empty or self), and the leader's request to this member as
// transferee; the switch is the table "Dispatch of a LeadershipTransferRequest". reply is called
// exactly once, outside the lock, within TransferBound.
func (e *Elector) HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	e.mu.Lock()
	defer e.unlockAndDeliver()
	now := e.clock.Now()
	by := asker{reply: reply, remoteID: req.LocalID}
	ms := e.ms
	switch {
	case req.Group != ms.Group(): // row 0: another group learns nothing but the code
		e.post(transferReply{reply: reply,
			resp: &protocol.LeadershipTransferResponse{Header: protocol.Header{Code: protocol.CodeUnknownGroup}}})
	case req.RemoteID != "" && req.RemoteID != ms.SelfID(): // row 0'
		e.answer(by, e.transferResponse(protocol.CodeUnknownMember))
	case req.TransfereeID == ms.SelfID() && req.TransferID != "" && req.TransferID != ms.SelfID(): // row 1
		e.acceptTakeLeadership(req, now, by)
	default: // row 2
		e.startTransfer(req.TransfereeID, req.Term, now, by)
	}
}

// acceptTakeLeadership is the transferee's side of docs/protocol.md 7.8: check the request, then
// wait (in the passes) for the ledger to catch up before campaigning.
func (e *Elector) acceptTakeLeadership(req *protocol.LeadershipTransferRequest, now time.Time, by asker) {
	ms := e.ms
	no := func(code protocol.ResponseCode) { e.answer(by, e.transferResponse(code)) }
	switch {
	case req.TransferID != ms.LeaderID(): // row 1
		no(protocol.CodeInconsistentLeader)
		return
	case req.Term != ms.CurrTerm(): // row 2
		no(protocol.CodeInconsistentTerm)
		return
	case e.take.active() && req.TransferID == e.take.from && req.Term == e.take.fromTerm: // row 3
		// A duplicate of the request being served (a retry, or the network repeating it): it
		// gets the same answer, so whichever copy's answer arrives first tells the truth.
		e.take.askers = append(e.take.askers, by)
		return
	case e.take.active(): // row 4, defensive: rows 1-3 leave no request for it
		no(protocol.CodeLeaderTransferring)
		return
	case e.stalled(now): // row 5
		// This member's passes stopped for a while (a stopped process, a long pause): the
		// request may have waited all that time, its leader may have given up on it, and the
		// leader and term it was checked against above may be out of date. A final "no" is
		// the truth; acting on it could make a transfer its leader no longer expects.
		e.logAt(zap.WarnLevel).Warn("refuses to take leadership: stalled, the request may be stale", e.fields(
			zap.String("from", req.TransferID), zap.Duration("sinceLastPass", now.Sub(e.lastPass)))...)
		no(protocol.CodeTakeLeadershipFailed)
		return
	case !e.ledgerKnown || e.withdrawn: // row 6
		// A member that does not know its ledger cannot know it is caught up, and could not
		// campaign anyway (Options.LedgerFromStorage); a withdrawn one takes no leadership
		// (withdraw.go).
		no(protocol.CodeTakeLeadershipFailed)
		return
	case req.Term >= protocol.MaxTerm: // row 7
		// Taking leadership needs the next term, and there is none (protocol.MaxTerm).
		no(protocol.CodeTakeLeadershipFailed)
		return
	}
	e.take = &take{waiting: true, index: req.TakeLeadershipLedgerIndex, fromTerm: req.Term, // row 8
		deadline: now.Add(e.cfg.LeadershipTransferWaitTimeout), from: req.TransferID, askers: []asker{by}}
	e.logAt(zap.InfoLevel).Info("asked to take leadership", e.fields(zap.String("from", req.TransferID), zap.Int64("takeLeadershipLedgerIndex", req.TakeLeadershipLedgerIndex))...)
	e.maintainTakeLeadership(now) // usually caught up already: start at once
}

// maintainTransfer advances transfers and the preferred-leader check each pass.
func (e *Elector) maintainTransfer(now time.Time) {
	e.resumeTransfer(now)
	if e.handOver.expired(now) {
		e.finishTransfer(e.handOver.seq, protocol.CodeTimeout, nil, "no answer within the transfer bound: outcome unknown")
	}
	e.maintainTakeLeadership(now)
	e.maintainPreferredLeader(now)
}

func (e *Elector) maintainTakeLeadership(now time.Time) {
	x := e.take
	switch {
	case x == nil:
	case x.waiting && x.interrupted(e.ms):
		e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "the term or role changed while catching up")
	case x.waiting && x.caughtUp(e.ms):
		e.beginTakeLeadership(now)
	case x.waiting && now.After(x.deadline):
		e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "ledger did not catch up within leadershipTransferWaitTimeout")
	case x.taking && now.After(x.deadline):
		e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "not elected within the take-leadership budget")
	}
}

// beginTakeLeadership campaigns at term+1. Unlike DLedger, it adopts and persists the new term
// at once and votes in the same pass: while it still sat at the old term, the old leader's next
// heartbeat would make it a follower again (docs/protocol.md 7.6 row 4) and abort the transfer.
func (e *Elector) beginTakeLeadership(now time.Time) {
	x := e.take // waiting (maintainTakeLeadership)
	x.targetTerm = x.fromTerm + 1
	e.becomeCandidate(x.targetTerm, now, "taking leadership")
	if _, err := e.ms.NextTermVotingForSelf(); err != nil { // its vote round starts below
		// Still waiting, so endTakeLeadership answers (it ignores a take that is over).
		e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "cannot persist the new term: "+err.Error())
		return
	}
	x.waiting, x.taking = false, true
	x.deadline = now.Add(e.cfg.takeBudget())
	e.needIncreaseTerm = false
	e.lastParseResult = protocol.WaitToRevote
	e.setNextVote(time.Time{})
	e.emit(now)
	e.maintainAsCandidate(now)
}

// endTakeLeadership answers the leader and returns this member to the normal vote interval.
// A failed take leaves it an ordinary candidate, so the usual election settles the group. A
// "no" is final: the take's vote round in flight is abandoned (its late ACCEPTs count for
// nothing), and the next round is an ordinary one, after an ordinary re-vote delay.
func (e *Elector) endTakeLeadership(code protocol.ResponseCode, why string) {
	x := e.take
	if !x.active() {
		return
	}
	if code == protocol.CodeTakeLeadershipFailed && x.taking && e.ms.Role() == protocol.CANDIDATE {
		if e.vote != nil && e.vote.term == x.targetTerm {
			e.vote = nil
		}
		e.lastParseResult = protocol.WaitToRevote
		e.setNextVote(e.clock.Now().Add(e.randomDelay(e.cfg.MinVoteInterval, e.cfg.MaxVoteInterval)))
	}
	askers := x.askers
	// bugs.EndlessTake answers but forgets to leave the take (checker tests only, bugs.go).
	x.waiting, x.taking, x.askers = false, x.taking && e.bugs.EndlessTake, nil
	if !x.active() {
		e.take = nil
	}
	e.logAt(zap.InfoLevel).Info("take leadership finished", e.fields(zap.Stringer("code", code), zap.String("why", why))...)
	for _, by := range askers {
		e.answer(by, e.transferResponse(code))
	}
}

// onRoleEvent lets a campaign in progress learn its outcome from the next role change.
func (e *Elector) onRoleEvent(ev RoleEvent) {
	x := e.take
	if !x.campaigning() {
		return
	}
	switch {
	case ev.Term > x.targetTerm:
		e.endTakeLeadership(protocol.CodeExpiredTerm, "a higher term appeared")
	case ev.Role == protocol.LEADER && ev.Term == x.targetTerm:
		e.endTakeLeadership(protocol.CodeSuccess, "elected")
	case ev.Role == protocol.FOLLOWER:
		e.endTakeLeadership(protocol.CodeTakeLeadershipFailed, "another member won")
	}
}

// preferredOn: the preferred-leader check runs (preferred leaders are configured, this member
// leads, and no transfer is in progress). The check's pass and its deadline both read it.
func (e *Elector) preferredOn() bool {
	return len(e.cfg.PreferredLeaderIDs) > 0 && e.ms.Role() == protocol.LEADER && !e.handOver.busy()
}

// maintainPreferredLeader: once a second a leader that is not preferred hands over to the live
// preferred member with the newest ledger and a lag below maxLeadershipTransferWaitIndex
// (docs/protocol.md 7.9).
func (e *Elector) maintainPreferredLeader(now time.Time) {
	if !e.preferredOn() || now.Before(e.lead.preferred.nextCheck) {
		return
	}
	e.lead.preferred.nextCheck = now.Add(preferredCheckInterval)
	for _, id := range e.cfg.PreferredLeaderIDs {
		if id == e.ms.SelfID() {
			return
		}
	}
	preferred := func(id string) bool { return slices.Contains(e.cfg.PreferredLeaderIDs, id) }
	if e.fetchLedgers(preferred, now) {
		// The check reads the preferred members' ledger ends: quiet ones are fetched first,
		// and the check runs again once their round is over (docs/protocol.md 12.2 rule 5):
		// half a LedgerFreshness on, so that the fetched ends are still fresh then even if
		// that pass runs late (at a full LedgerFreshness, one late by more than the fetch
		// round's own delay found them stale again and fetched again, and again).
		e.lead.preferred.nextCheck = now.Add(e.cfg.LedgerFreshness() / 2)
		return
	}
	best := e.bestTarget(preferred)
	if best == "" {
		return
	}
	e.logAt(zap.InfoLevel).Info("hands over to a preferred leader", e.fields(zap.String("to", best))...)
	e.startTransfer(best, -1, now, asker{preferred: best})
}

// preferredTransferEnded is the answer to a transfer the preferred-leader check started: a
// failure backs the next check off, a success resets the back-off (docs/protocol.md 7.9).
func (e *Elector) preferredTransferEnded(to string, code protocol.ResponseCode) {
	p := &e.leader().preferred // the check that started the transfer ran as leader
	if code == protocol.CodeSuccess {
		p.failures = 0
		return
	}
	p.failures++
	wait := preferredBackoff(p.failures)
	p.nextCheck = e.clock.Now().Add(wait)
	e.logAt(zap.InfoLevel).Info("hand-over to a preferred leader failed; backing off", e.fields(zap.String("to", to),
		zap.Stringer("code", code), zap.Duration("wait", wait))...)
}

// closeEnough says whether a member whose ledger ends at l may take leadership from this leader:
// its lag must be below maxLeadershipTransferWaitIndex (docs/protocol.md 7.8; Java DLedger refuses
// a lag >= the setting with FALL_BEHIND_TOO_MUCH). Both indexes are bounded by
// protocol.MaxLedgerValue, so the difference cannot wrap.
func (e *Elector) closeEnough(l memberstate.LedgerEnd) bool {
	return e.ms.Ledger().Index-l.Index < e.cfg.MaxLeadershipTransferWaitIndex
}

// bestTarget is the live member (other than self) accepted by ok whose reported ledger is
// newest, with a lag below maxLeadershipTransferWaitIndex; ties go to the earlier member in
// peer order. Leader only; "" if none.
func (e *Elector) bestTarget(ok func(id string) bool) string {
	best := -1
	for i, p := range e.ms.Peers() {
		st := e.peers[i]
		if p.ID == e.ms.SelfID() || !ok(p.ID) || !st.alive || !st.known || !e.closeEnough(st.ledger) {
			continue
		}
		if best < 0 || st.ledger.NewerThan(e.peers[best].ledger) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return e.ms.Peers()[best].ID
}

// fetchLedgers asks for the ledger end of every live follower accepted by ok whose ledger end
// is too old for a decision (ledgerStale), and says whether it asked for any.
func (e *Elector) fetchLedgers(ok func(id string) bool, now time.Time) bool {
	asked := false
	for i, p := range e.ms.Peers() {
		if p.ID != e.ms.SelfID() && ok(p.ID) && e.peers[i].alive && e.ledgerStale(i, now) {
			e.fetchLedger(i)
			asked = true
		}
	}
	return asked
}

// HandOverTarget names the member a leader stopping gracefully should hand over to: the most
// up-to-date live follower. "" when this member is not leader or none qualifies.
func (e *Elector) HandOverTarget() string {
	e.mu.Lock()
	defer e.unlockQuiet()
	if e.ms.Role() != protocol.LEADER {
		return ""
	}
	return e.bestTarget(func(string) bool { return true })
}
