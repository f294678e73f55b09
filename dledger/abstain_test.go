package dledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// newAbstainingUnit is n0 in a 3-member group at term 5 with Options.LedgerFromStorage, just
// restarted: its ledger not reported yet.
func newAbstainingUnit(t *testing.T) *unit {
	t.Helper()
	store := memberstate.NewMemStore()
	if err := store.Save(memberstate.Durable{Term: 5}); err != nil {
		t.Fatal(err)
	}
	ms, err := memberstate.New("g", "n0", peersOf(3), store)
	if err != nil {
		t.Fatal(err)
	}
	u := &unit{t: t, ms: ms, tr: &recTransport{}, clock: newFakeClock(), store: store, cfg: testConfig()}
	u.e, err = newElector(u.cfg, ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, LedgerFromStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// handleVote row A (ours, docs/protocol.md 7.1): a member that does not know its ledger grants
// nothing, and its term, role and vote do not move for a vote request, whatever its term.
func TestHandleVoteRowA_REJECT_LEDGER_UNKNOWN(t *testing.T) {
	for _, term := range []int64{4, 5, 9} {
		u := newAbstainingUnit(t)
		saves := u.store.Saves()
		resp := u.e.HandleVote(voteReq("n1", term, 5, 50))
		if resp.Code != protocol.CodeSuccess || resp.VoteResult != protocol.VoteRejectLedgerUnknown || resp.Term != 5 {
			t.Fatalf("request at term %d: %v %v term %d, want SUCCESS REJECT_LEDGER_UNKNOWN term 5", term, resp.Code, resp.VoteResult, resp.Term)
		}
		st := u.e.Status()
		if st.Term != 5 || st.Role != protocol.CANDIDATE || st.VoteFor != "" || st.KnownMaxTermInGroup != 5 ||
			u.e.needIncreaseTerm || u.store.Saves() != saves || st.LedgerKnown {
			t.Fatalf("request at term %d moved the abstaining member: %+v (increase %v)", term, st, u.e.needIncreaseTerm)
		}
	}
	// Once the ledger is reported the ordinary rows apply: a stale candidate is refused (row 3
	// or 4), an up-to-date one granted.
	u := newAbstainingUnit(t)
	u.setLedger(5, 100)
	if st := u.e.Status(); !st.LedgerKnown {
		t.Fatal("Status.LedgerKnown false after the report")
	}
	if r := u.e.HandleVote(voteReq("n1", 5, 5, 50)); r.VoteResult != protocol.VoteRejectSmallLedgerEndIndex {
		t.Fatalf("stale candidate after the report: %v", r.VoteResult)
	}
	if r := u.e.HandleVote(voteReq("n1", 5, 5, 100)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("up-to-date candidate after the report: %v", r.VoteResult)
	}
	// Without the option nothing changes: the ledger is whatever was set, empty at first.
	plain := newUnit(t, 3, nil)
	if r := plain.e.HandleVote(voteReq("n1", 0, -1, -1)); r.VoteResult != protocol.VoteAccept || !plain.e.Status().LedgerKnown {
		t.Fatalf("without LedgerFromStorage: %v", r.VoteResult)
	}
}

// A candidate's tally counts REJECT_LEDGER_UNKNOWN as no answer: two abstaining voters leave the
// round without a quorum of valid answers (WAIT_TO_REVOTE, same term), not a lost split vote
// that would raise the term.
func TestCandidateCountsLedgerUnknownAsNoAnswer(t *testing.T) {
	u := newUnit(t, 3, nil)
	votes := startRound(t, u)
	for _, v := range votes {
		v.done(voteResp(v.to, protocol.VoteRejectLedgerUnknown, 0), nil)
	}
	if st := u.e.Status(); st.LastParseResult != protocol.WaitToRevote {
		t.Fatalf("round of REJECT_LEDGER_UNKNOWN answers decided %v, want WAIT_TO_REVOTE", st.LastParseResult)
	}
}

// While abstaining a member does not campaign and refuses to take leadership; it follows a
// leader, also one at a higher term; after its ledger is reported it campaigns again.
func TestAbstainingMemberFollowsButNeverCampaigns(t *testing.T) {
	u := newAbstainingUnit(t)
	for i := 0; i < 200; i++ {
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
	}
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("an abstaining member sent %d vote requests", len(v))
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", 7)); r.Code != protocol.CodeSuccess { // row 7a
		t.Fatalf("heartbeat at a higher term: %v", r.Code)
	}
	if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != 7 || st.LeaderID != "n1" || st.VoteFor != "" {
		t.Fatalf("the abstaining member does not follow n1 at 7: %+v", st)
	}
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 7, -1), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take-leadership while abstaining: %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	if len(u.tr.takeVotes()) != 0 {
		t.Fatal("campaigned on a take-leadership request while abstaining")
	}
	// The leader goes silent: a candidate again, but still no campaign.
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	for i := 0; i < 100; i++ {
		u.e.Tick()
		u.clock.Advance(u.cfg.MaintainInterval)
	}
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || len(u.tr.takeVotes()) != 0 {
		t.Fatalf("after the leader went silent: %v, and it campaigned", st.Role)
	}
	u.setLedger(5, 100)
	u.e.Tick()
	if v := u.tr.takeVotes(); len(v) != 2 {
		t.Fatalf("after the report: %d vote requests, want 2", len(v))
	}
}

// A failed write of the higher term while abstaining is retried at the next such heartbeat,
// not on every pass.
func TestAbstainingMemberRetriesAFailedTermWriteAtTheNextHeartBeat(t *testing.T) {
	u := newAbstainingUnit(t)
	u.store.FailSaves(errors.New("EIO"))
	if r := u.e.HandleHeartBeat(hbReq("n1", 7)); r.Code != protocol.CodeTermNotReady { // row 7b
		t.Fatalf("heartbeat at a higher term with a failing disk: %v", r.Code)
	}
	for i := 0; i < 5; i++ {
		u.e.Tick()
	}
	if u.e.needIncreaseTerm || u.ms.CurrTerm() != 5 {
		t.Fatalf("after a failed write: term %d, pending %v", u.ms.CurrTerm(), u.e.needIncreaseTerm)
	}
	u.store.FailSaves(nil)
	u.e.HandleHeartBeat(hbReq("n1", 7))
	u.e.Tick()
	if u.ms.CurrTerm() != 7 {
		t.Fatalf("term %d after the next heartbeat, want 7", u.ms.CurrTerm())
	}
}

// An abstaining follower says so in its heartbeat answers, and a leader never picks it for a
// hand-over or accepts a transfer to it: its ledger (-1,-1) means "unknown", not "empty".
func TestAbstainingMemberIsNoHandOverTarget(t *testing.T) {
	u := newAbstainingUnit(t)
	if r := u.e.HandleHeartBeat(hbReq("n1", 5)); r.Code != protocol.CodeSuccess || !r.LedgerUnknown {
		t.Fatalf("abstaining follower's answer: %+v, want SUCCESS with LedgerUnknown", r)
	}
	u.setLedger(5, 100)
	if r := u.e.HandleHeartBeat(hbReq("n1", 5)); r.LedgerUnknown {
		t.Fatalf("answer after the report still says LedgerUnknown: %+v", r)
	}

	leader := newUnit(t, 3, nil)
	leader.makeLeader()
	for _, h := range sendHeartBeats(t, leader) {
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		r.LedgerEndTerm, r.LedgerEndIndex = -1, -1
		r.LedgerUnknown = h.to == "n1" // n1 abstains, n2 has an empty ledger like the leader's
		h.done(r, nil)
	}
	if got := leader.e.HandOverTarget(); got != "n2" {
		t.Fatalf("hand-over target %q, want n2 (n1 abstains)", got)
	}
	reply, got := capture()
	leader.e.TransferLeadership("n1", -1, reply)
	if r := got(); r == nil || r.Code != protocol.CodeFallBehindTooMuch {
		t.Fatalf("transfer to the abstaining n1: %+v, want FALL_BEHIND_TOO_MUCH", r)
	}
}
