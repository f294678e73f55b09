package server

import (
	"context"
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// StorageUnhealthy on the leader: it is no longer leader when the call returns, another member
// is elected, it is refused as a hand-over target while unhealthy, and once the storage
// reports its ledger again it can be handed leadership. Without the step-down the first check
// fails; without the abstention the transfer to it succeeds.
func TestStorageUnhealthyStepsDownAndIsNoHandOverTarget(t *testing.T) {
	g := startGroupWith(t, 3, map[int][2]int64{0: {1, 100}, 1: {1, 100}, 2: {1, 100}}, calmTimings())
	leaderID, _ := g.awaitLeader(electionLimit, "")
	sick := g.servers[g.index(leaderID)]
	if err := sick.StorageUnhealthy("fsync stalled"); err != nil {
		t.Fatal(err)
	}
	if st := sick.Status(); st.Role == Leader || st.LedgerKnown {
		t.Fatalf("after StorageUnhealthy: role %v, ledger known %v; want stepped down and abstaining", st.Role, st.LedgerKnown)
	}
	newID, _ := g.awaitLeader(electionLimit, leaderID)
	leader := g.servers[g.index(newID)]
	awaitPeerView(t, leader, leaderID, "the new leader to hear the sick member abstain", func(p dledger.PeerStatus) bool { return p.Alive && !p.LedgerSet })
	te := transferErr(t, context.Background(), leader, leaderID)
	wantReason(t, te, ErrTransfereeAbstaining, true)

	if err := sick.UpdateLedger(1, 100); err != nil { // healthy again
		t.Fatal(err)
	}
	awaitPeerView(t, leader, leaderID, "the new leader to hear the member report", func(p dledger.PeerStatus) bool { return p.LedgerSet })
	ctx, cancel := context.WithTimeout(context.Background(), leader.TransferTimeout()+electionLimit)
	defer cancel()
	if _, err := leader.TransferLeadership(ctx, leaderID); err != nil {
		t.Fatalf("transfer to the member once healthy: %v", err)
	}
}

// A member without storage has no disk to be unhealthy.
func TestStorageUnhealthyWithoutStorage(t *testing.T) {
	c := soloConfig(t)
	c.Ledger = LedgerNone
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.StorageUnhealthy("x"); err != ErrNoStorage {
		t.Fatalf("StorageUnhealthy in ledger mode none: %v, want ErrNoStorage", err)
	}
}
