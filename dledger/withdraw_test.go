package dledger

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// A withdrawn member (docs/protocol.md 7.12) follows and grants votes, but never campaigns,
// refuses to take leadership and says so in its heartbeat answers; restored, it campaigns
// again. The vote it grants is what tells it apart from an abstaining member
// (TestAbstainingMemberFollowsButNeverCampaigns), whose quorum would be lost.
func TestWithdrawnMemberVotesButNeverCampaigns(t *testing.T) {
	u := newUnit(t, 3, nil)
	followAt3(u)
	u.e.WithdrawCandidacy("test")
	if !u.e.CandidacyWithdrawn() {
		t.Fatal("CandidacyWithdrawn false after WithdrawCandidacy")
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", 3)); r.Code != protocol.CodeSuccess || !r.LedgerUnknown {
		t.Fatalf("withdrawn follower's heartbeat answer: %+v, want SUCCESS with LedgerUnknown", r)
	}
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, -1), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take-leadership while withdrawn: %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	// The leader goes silent: a candidate, but no vote round, however long it waits.
	u.clock.Advance(u.cfg.DetectionWindow() + time.Millisecond)
	for range 300 {
		u.e.Tick()
		u.clock.Advance(u.cfg.MaintainInterval)
	}
	if st := u.e.Status(); st.Role != protocol.CANDIDATE || st.Term != 3 || len(u.tr.takeVotes()) != 0 {
		t.Fatalf("withdrawn member after its leader went silent: %v at %d, and it campaigned", st.Role, st.Term)
	}
	// n2 campaigns at 4 with an up-to-date ledger: granted.
	if r := u.e.HandleVote(voteReq("n2", 4, 3, 10)); r.VoteResult != protocol.VoteAccept {
		t.Fatalf("vote for n2 while withdrawn: %v, want ACCEPT", r.VoteResult)
	}
	u.e.RestoreCandidacy()
	if u.e.CandidacyWithdrawn() {
		t.Fatal("CandidacyWithdrawn true after RestoreCandidacy")
	}
	for range 300 {
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
		if len(u.tr.takeVotes()) > 0 {
			return
		}
	}
	t.Fatal("a restored candidate never campaigned")
}

// Withdrawing ends a campaign under way: a take-leadership in progress is answered
// TAKE_LEADERSHIP_FAILED and its vote round's late ACCEPTs elect nobody.
func TestWithdrawEndsATakeLeadership(t *testing.T) {
	u := newUnit(t, 3, nil)
	followAt3(u)
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", 3, 10), reply)
	votes := u.tr.takeVotes()
	if len(votes) != 2 || !u.e.Status().TakingLeadership {
		t.Fatalf("the take did not start: %d votes", len(votes))
	}
	u.e.WithdrawCandidacy("test")
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take after the withdrawal: %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	for _, v := range votes {
		v.done(voteResp(v.to, protocol.VoteAccept, v.req.Term), nil)
	}
	u.e.Tick()
	if st := u.e.Status(); st.Role == protocol.LEADER {
		t.Fatalf("late ACCEPTs elected a withdrawn member: %+v", st)
	}
}

// A withdrawn leader keeps leading (no election, no leaderless group) and can hand over.
func TestWithdrawnLeaderKeepsLeading(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.makeLeader()
	term := u.e.Status().Term
	u.e.WithdrawCandidacy("test")
	for _, h := range sendHeartBeats(t, u) {
		r := hbResp(h.to, protocol.CodeSuccess, h.req.Term)
		r.LedgerEndTerm, r.LedgerEndIndex = -1, -1
		h.done(r, nil)
	}
	if st := u.e.Status(); st.Role != protocol.LEADER || st.Term != term {
		t.Fatalf("withdrawn leader: %v at %d, want LEADER at %d", st.Role, st.Term, term)
	}
	if got := u.e.HandOverTarget(); got == "" {
		t.Fatal("a withdrawn leader finds no hand-over target")
	}
}
