package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// A member whose Stop has begun refuses to take leadership: a leader handing over (its own
// stop, an admin transfer) gets TAKE_LEADERSHIP_FAILED from it and keeps leading, instead of
// making a member that is about to stop lead for a moment (and hand over again in its own
// stop) when a whole group stops at once. A member that is not stopping still takes over.
func TestStoppingMemberTakesNoLeadership(t *testing.T) {
	g := startGroupWith(t, 3, nil, calmTimings())
	leader, term := g.awaitLeader(electionLimit, "")
	li := g.index(leader)
	fi := (li + 1) % 3
	f := g.servers[fi]
	to := fmt.Sprintf("n%d", fi)
	// A transfer needs the leader to have heard the target's ledger (else FALL_BEHIND_TOO_MUCH).
	dledgertest.Eventually(t, electionLimit, "the leader to hear "+to+"'s ledger", func() bool {
		p := g.servers[li].Status().Peers[fi]
		return p.Alive && p.LedgerSet
	})

	f.mu.Lock()
	f.state = 2 // as Stop sets it first; the member keeps running, as during its stop
	f.mu.Unlock()
	res, err := g.servers[li].TransferLeadership(context.Background(), to)
	f.mu.Lock()
	f.state = 1 // so that the test's cleanup stops it for real
	f.mu.Unlock()
	var te *TransferError
	if !errors.As(err, &te) || te.Code != protocol.CodeTakeLeadershipFailed || !errors.Is(err, ErrTransferRefused) {
		t.Fatalf("transfer to %s while it stops: %+v %v, want a refusal with TAKE_LEADERSHIP_FAILED", to, res, err)
	}
	if st := g.servers[li].Status(); st.Role != protocol.LEADER || st.Term != term {
		t.Fatalf("the leader after the refusal: %v at term %d, want LEADER at %d", st.Role, st.Term, term)
	}
	if st := f.fullStatus(); st.Term != term || st.TakingLeadership {
		t.Fatalf("the stopping member: term %d, taking %v; want term %d, not taking", st.Term, st.TakingLeadership, term)
	}

	// Not stopping: it takes over.
	res, err = g.servers[li].TransferLeadership(context.Background(), to)
	if err != nil || res.LeaderID != to {
		t.Fatalf("transfer to %s: %+v %v, want SUCCESS", to, res, err)
	}
}
