package server

import (
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
)

// drainTarget picks as the stop's hand-over does (alive, ledger known, newest ledger, ties in
// peer order) but never a member on the drained host itself, nor the one that just failed.
func TestDrainTarget(t *testing.T) {
	le := func(term, index int64) memberstate.LedgerEnd { return memberstate.LedgerEnd{Term: term, Index: index} }
	peers := func(ps ...dledger.PeerStatus) dledger.Status { return dledger.Status{Peers: ps} }
	self := dledger.PeerStatus{ID: "n0", Addr: "h0", Self: true, Alive: true, LedgerSet: true, Ledger: le(5, 100)}
	for _, c := range []struct {
		name string
		st   dledger.Status
		skip string
		want string
	}{
		{"newest ledger wins", peers(self,
			dledger.PeerStatus{ID: "n1", Addr: "h1", Alive: true, LedgerSet: true, Ledger: le(5, 90)},
			dledger.PeerStatus{ID: "n2", Addr: "h2", Alive: true, LedgerSet: true, Ledger: le(5, 99)}), "", "n2"},
		{"ties go to peer order", peers(self,
			dledger.PeerStatus{ID: "n1", Addr: "h1", Alive: true, LedgerSet: true, Ledger: le(5, 99)},
			dledger.PeerStatus{ID: "n2", Addr: "h2", Alive: true, LedgerSet: true, Ledger: le(5, 99)}), "", "n1"},
		{"a member on this host is no target", peers(self,
			dledger.PeerStatus{ID: "n1", Addr: "h0", Alive: true, LedgerSet: true, Ledger: le(5, 100)},
			dledger.PeerStatus{ID: "n2", Addr: "h2", Alive: true, LedgerSet: true, Ledger: le(5, 1)}), "", "n2"},
		{"dead, or withdrawn/abstaining (no ledger), is no target", peers(self,
			dledger.PeerStatus{ID: "n1", Addr: "h1", Alive: false, LedgerSet: true, Ledger: le(5, 100)},
			dledger.PeerStatus{ID: "n2", Addr: "h2", Alive: true, LedgerSet: false, Ledger: le(5, 100)}), "", ""},
		{"the member that just failed is skipped", peers(self,
			dledger.PeerStatus{ID: "n1", Addr: "h1", Alive: true, LedgerSet: true, Ledger: le(5, 100)},
			dledger.PeerStatus{ID: "n2", Addr: "h2", Alive: true, LedgerSet: true, Ledger: le(5, 1)}), "n1", "n2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := drainTarget(c.st, "h0", c.skip); got != c.want {
				t.Fatalf("drainTarget = %q, want %q", got, c.want)
			}
		})
	}
}
