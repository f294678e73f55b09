package dledger

import (
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// ForgetLedger (the storage's disk is unhealthy): a leader steps down at once, and until the
// next UpdateLedger the member grants no vote, does not campaign and refuses to take
// leadership; the report ends it. Each check fails if ForgetLedger only cleared the flag (the
// leader keeps leading) or did nothing (the vote is granted, the campaign starts).
func TestForgetLedgerStepsDownAndAbstainsUntilReported(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	term := u.ms.CurrTerm()
	u.e.ForgetLedger("fsync stalled")
	if st := u.e.Status(); st.Role == protocol.LEADER || st.LedgerKnown || st.Term != term {
		t.Fatalf("after ForgetLedger: %v at term %d (was %d), ledger known %v; want a non-leader that abstains, same term",
			st.Role, st.Term, term, st.LedgerKnown)
	}
	u.tr.takeVotes()
	for i := 0; i < 200; i++ {
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
	}
	if v := u.tr.takeVotes(); len(v) != 0 {
		t.Fatalf("campaigned %d times while its storage was unhealthy", len(v))
	}
	if r := u.e.HandleVote(voteReq("n1", term+1, term, 1000)); r.VoteResult != protocol.VoteRejectLedgerUnknown {
		t.Fatalf("vote while unhealthy: %v, want REJECT_LEDGER_UNKNOWN", r.VoteResult)
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", term+1)); r.Code != protocol.CodeSuccess || !r.LedgerUnknown {
		t.Fatalf("heartbeat answer while unhealthy: %+v, want SUCCESS with LedgerUnknown (no hand-over target)", r)
	}
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", term+1, -1), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take-leadership while unhealthy: %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	u.e.ForgetLedger("again") // idempotent
	u.setLedger(term, 100)
	if !u.e.Status().LedgerKnown {
		t.Fatal("the report did not end the abstention")
	}
	if r := u.e.HandleVote(voteReq("n2", term+2, term, 100)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("vote after the report: %v, want ACCEPT", r.VoteResult)
	}
}
