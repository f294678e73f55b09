package dledger

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// A member that is a quorum by itself never steps down for lack of acks: in a 1-member group
// a process stall longer than the detection window (no pass ran) must not make the leader
// step down and re-elect itself at the same term, which hands its broker a needless fence
// (a CANDIDATE event, then LEADER again).
func TestLoneLeaderKeepsLeadingAfterAStall(t *testing.T) {
	u := newUnit(t, 1, nil)
	u.makeLeader()
	term := u.e.Status().Term
	u.events()
	for _, stall := range []time.Duration{u.cfg.DetectionWindow() + time.Millisecond, 10 * time.Second} {
		u.clock.Advance(stall)
		u.e.Tick()
		u.clock.Advance(u.cfg.MaintainInterval)
		u.e.Tick()
		if st := u.e.Status(); st.Role != protocol.LEADER || st.Term != term {
			t.Fatalf("after a %v stall: %v at term %d, want LEADER at %d", stall, st.Role, st.Term, term)
		}
		if evs := u.events(); len(evs) != 0 {
			t.Fatalf("after a %v stall the lone leader emitted %+v; want no role change", stall, evs)
		}
	}
}
