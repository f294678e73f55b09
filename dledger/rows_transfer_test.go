package dledger

// Rows of docs/protocol.md 7.8 that the answer-code tests (transfer_test.go, truth_test.go)
// cover under other names, each under its row's name, so that TestProtocolDocIsExecutable can
// tie every row of the three transfer tables to a test.

import (
	"testing"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestTransferDispatch is the table "Dispatch of a LeadershipTransferRequest".
func TestTransferDispatch(t *testing.T) {
	admin := func(mut func(r *protocol.LeadershipTransferRequest)) *protocol.LeadershipTransferRequest {
		r := &protocol.LeadershipTransferRequest{Header: protocol.Header{Group: "g", RemoteID: "n0", LocalID: "n2", Term: 3},
			TransfereeID: "n1"}
		if mut != nil {
			mut(r)
		}
		return r
	}
	for _, c := range []struct {
		name string
		req  *protocol.LeadershipTransferRequest
		want protocol.ResponseCode
	}{
		{"row0_UNKNOWN_GROUP", admin(func(r *protocol.LeadershipTransferRequest) { r.Group = "other" }), protocol.CodeUnknownGroup},
		{"row0prime_UNKNOWN_MEMBER_addressed_to_another_member", admin(func(r *protocol.LeadershipTransferRequest) { r.RemoteID = "n2" }),
			protocol.CodeUnknownMember},
		// Row 1: the transferee's side, whose row 1 refuses a transferId that is not its leader
		// (the leader's side would answer NOT_LEADER: n0 follows).
		{"row1_transferee_side", takeReq("n2", 3, 10), protocol.CodeInconsistentLeader},
		// Row 2: an admin request (no transferId) goes to the leader's side, whose row 3
		// answers a follower's NOT_LEADER (the transferee's side would answer
		// INCONSISTENT_LEADER).
		{"row2_admin_request_is_the_leader_side", admin(func(r *protocol.LeadershipTransferRequest) { r.TransfereeID = "n0" }),
			protocol.CodeNotLeader},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t, 3, nil)
			followAt3(u)
			reply, got := capture()
			u.e.HandleLeadershipTransfer(c.req, reply)
			if r := got(); r == nil || r.Code != c.want {
				t.Fatalf("answer %+v, want %v", r, c.want)
			}
			if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != 3 || st.TakingLeadership {
				t.Fatalf("a refused request changed the member: %+v", st)
			}
		})
	}
}

// TestTransferLeaderSideRows: row 7, the transfer that starts (rows 1-6 are the answer codes of
// TestTransferLeaderSideAnswerCodes).
func TestTransferLeaderSideRows(t *testing.T) {
	t.Run("row7_sends_the_request_and_marks_the_transfer", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.setLedger(1, 10)
		leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": {Term: 1, Index: 9}, "n2": {Term: 1, Index: 10}})
		reply, got := capture()
		u.e.TransferLeadership("n1", -1, reply)
		sent := u.tr.takeTransfers()
		if len(sent) != 1 || sent[0].to != "n1" {
			t.Fatalf("sent %+v, want one request to n1", sent)
		}
		r := sent[0].req
		if r.TransferID != "n0" || r.TransfereeID != "n1" || r.LeaderID != "n0" || r.Term != u.e.Status().Term ||
			r.TakeLeadershipLedgerIndex != 10 {
			t.Fatalf("request %+v, want {transferId n0, transfereeId n1, leaderId n0, term %d, index 10}", r, u.e.Status().Term)
		}
		if got() != nil {
			t.Fatal("answered before the transferee did")
		}
		if st := u.e.Status(); st.TransferringTo != "n1" || st.Role != protocol.LEADER {
			t.Fatalf("status %+v, want a leader transferring to n1", st)
		}
	})
}

// TestTransferTransfereeSideRows: rows 5-7, the final refusals (rows 1-3 and 8 are in
// TestTransferTransfereeSideAnswerCodes; row 4 cannot be reached, see tableHomes).
func TestTransferTransfereeSideRows(t *testing.T) {
	refused := func(t *testing.T, u *unit, req *protocol.LeadershipTransferRequest) {
		t.Helper()
		term := u.e.Status().Term
		reply, got := capture()
		u.e.HandleLeadershipTransfer(req, reply)
		if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
			t.Fatalf("answer %+v, want TAKE_LEADERSHIP_FAILED", r)
		}
		if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != term || st.TakingLeadership || len(u.tr.takeVotes()) != 0 {
			t.Fatalf("the refused request changed the member: %+v", st)
		}
	}
	t.Run("row5_stalled", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		u.clock.Advance(u.cfg.StallThreshold() + 1)
		refused(t, u, takeReq("n1", 3, 10))
	})
	t.Run("row6_abstaining", func(t *testing.T) {
		u := newAbstainingUnit(t)
		u.e.HandleHeartBeat(hbReq("n1", 5))
		refused(t, u, takeReq("n1", 5, -1))
	})
	t.Run("row6_withdrawn", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		followAt3(u)
		u.e.WithdrawCandidacy("drained")
		refused(t, u, takeReq("n1", 3, 10))
	})
	t.Run("row7_no_term_after_MaxTerm", func(t *testing.T) {
		u := newUnit(t, 3, nil)
		u.setTerm(protocol.MaxTerm, "n1")
		u.e.HandleHeartBeat(hbReq("n1", protocol.MaxTerm))
		refused(t, u, takeReq("n1", protocol.MaxTerm, -1))
	})
}
