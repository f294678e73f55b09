package dledger

import (
	"strings"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// docs/protocol.md 7.8 and Java DLedger accept a transferee only when its lag is below
// maxLeadershipTransferWaitIndex: lag max-1 is accepted, lag max is FALL_BEHIND_TOO_MUCH. The
// same boundary holds for the hand-over target (bestTarget: preferred leaders, Stop).
func TestTransferLagBoundary(t *testing.T) {
	const leaderIndex = 100
	for _, c := range []struct {
		name   string
		lag    int64
		accept bool
	}{
		{"lag_max_minus_1_accepted", 4, true},
		{"lag_max_refused", 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxLeadershipTransferWaitIndex = 5
			u := newUnitWithConfig(t, 3, nil, cfg)
			u.setLedger(0, leaderIndex)
			l := memberstate.LedgerEnd{Term: 0, Index: leaderIndex - c.lag}
			leaderWithFollowers(t, u, map[string]memberstate.LedgerEnd{"n1": l, "n2": l})
			if got := u.e.HandOverTarget(); (got != "") != c.accept {
				t.Errorf("lag %d (max %d): hand-over target %q, want accepted=%v", c.lag, cfg.MaxLeadershipTransferWaitIndex, got, c.accept)
			}
			reply, got := capture()
			u.e.TransferLeadership("n1", -1, reply)
			r := got()
			switch {
			case c.accept && (r != nil || len(u.tr.takeTransfers()) != 1):
				t.Errorf("lag %d (max %d): transfer answered %+v at once, want the request sent to n1", c.lag, cfg.MaxLeadershipTransferWaitIndex, r)
			case !c.accept && (r == nil || r.Code != protocol.CodeFallBehindTooMuch):
				t.Errorf("lag %d (max %d): transfer got %+v, want FALL_BEHIND_TOO_MUCH", c.lag, cfg.MaxLeadershipTransferWaitIndex, r)
			}
		})
	}
}

// maxLeadershipTransferWaitIndex 0 would refuse every transferee (a lag must be below it).
func TestConfigRefusesZeroTransferWaitIndex(t *testing.T) {
	c := DefaultConfig()
	c.MaxLeadershipTransferWaitIndex = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "maxLeadershipTransferWaitIndex must be >= 1") {
		t.Fatalf("Validate with maxLeadershipTransferWaitIndex 0: %v", err)
	}
}

// At protocol.MaxTerm there is no next term to take leadership at: the transferee refuses at
// once, and changes nothing.
func TestTakeLeadershipAtTheTermCeilingIsRefused(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(protocol.MaxTerm, "n1")
	u.e.HandleHeartBeat(hbReq("n1", protocol.MaxTerm))
	reply, got := capture()
	u.e.HandleLeadershipTransfer(takeReq("n1", protocol.MaxTerm, -1), reply)
	if r := got(); r == nil || r.Code != protocol.CodeTakeLeadershipFailed {
		t.Fatalf("take at MaxTerm: %+v, want TAKE_LEADERSHIP_FAILED", r)
	}
	if st := u.e.Status(); st.Role != protocol.FOLLOWER || st.Term != protocol.MaxTerm || st.TakingLeadership {
		t.Fatalf("after the refusal: %v at %d, taking=%v", st.Role, st.Term, st.TakingLeadership)
	}
}
