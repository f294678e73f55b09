package dledger

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/memberstate"
)

// TestSuccessorOrderIsTheJoinedIDs: the interned order of succession is the ids of
// successorIDs joined by ';', for any members alive, ledgers, preferred leaders and spread.
func TestSuccessorOrderIsTheJoinedIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		n := 1 + r.IntN(7)
		cfg := testConfig()
		if r.IntN(2) == 0 {
			cfg.PreferredLeaderIDs = []string{"n" + string(rune('0'+r.IntN(n)))}
		}
		u := newUnitWithConfig(t, n, nil, cfg)
		u.e.spread = r.IntN(2) == 0
		u.e.peers = make([]peerStatus, n)
		for i := range u.e.peers {
			u.e.peers[i].alive, u.e.peers[i].known = r.IntN(4) > 0, r.IntN(4) > 0
			u.e.peers[i].ledger = memberstate.LedgerEnd{Term: int64(r.IntN(3)), Index: int64(r.IntN(3))}
		}
		got, want := u.e.successorOrder(), strings.Join(u.e.successorIDs(), ";")
		if got != want {
			t.Fatalf("trial %d: order %q, successorIDs joined %q", trial, got, want)
		}
	}
}

// TestSuccessorOrderAllocatesNothing: a leader computes its order of succession for every pass
// it plans; once an order has been seen in the process, computing it again allocates nothing
// (issue 29, halloc: it was the largest count of allocations in a 10,000-group crash).
func TestSuccessorOrderAllocatesNothing(t *testing.T) {
	u := newUnit(t, 5, nil)
	u.e.spread = true
	u.e.peers = make([]peerStatus, 5)
	for i := range u.e.peers {
		u.e.peers[i].alive, u.e.peers[i].known = true, true
	}
	first := u.e.successorOrder()
	if a := testing.AllocsPerRun(100, func() {
		if u.e.successorOrder() != first {
			t.Fatal("the order moved")
		}
	}); a != 0 {
		t.Fatalf("an order of succession made %v allocations", a)
	}
}

// A full table still answers a new order, equal and not kept, and without the writer's lock:
// past its bound every call for a new order took it, and a host's leaders queued on it. Held
// for reading here, a writer's lock would wait for the test: the call must return anyway.
func TestInternTableFullTakesNoWritersLock(t *testing.T) {
	var tab internTable
	for i := range successorOrdersMax {
		tab.intern([]byte(fmt.Sprintf("n%d;n%d", i, i+1)))
	}
	if !tab.full.Load() {
		t.Fatal("not full at its bound")
	}
	tab.mu.RLock()
	got := make(chan string, 1)
	go func() { got <- tab.intern([]byte("x;y")) }()
	select {
	case s := <-got:
		tab.mu.RUnlock()
		if s != "x;y" || len(tab.m) != successorOrdersMax {
			t.Fatalf("full table: %q, %d kept", s, len(tab.m))
		}
	case <-time.After(10 * time.Second):
		tab.mu.RUnlock()
		t.Fatal("a new order on a full table waited for the writer's lock")
	}
}
