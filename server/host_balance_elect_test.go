package server

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/campaign"
)

// TestBalancerWaitsOutAMassElection: while members wait in line for the host's bound on
// campaigns, the balancer's plan waits (a settle at a time), and plans as soon as the line is
// empty; it never waits past its limit, and a host with no line (or no bound) waits not at all.
func TestBalancerWaitsOutAMassElection(t *testing.T) {
	now := time.Now()
	h := &Host{campaigns: campaign.New(1)}
	held, waiter := h.campaigns.Slot(func() {}), h.campaigns.Slot(func() {})
	if !held.Begin(now, now.Add(time.Minute)) || waiter.Begin(now, now.Add(time.Minute)) {
		t.Fatal("want one place held and one member in line")
	}
	steps := 0
	ok := h.awaitElections(time.Hour, time.Second, func(time.Duration) bool {
		steps++
		if steps == 3 {
			held.End(now) // the place goes to the one in line: the line is empty
		}
		return true
	})
	if !ok || steps != 3 {
		t.Fatalf("waited %d steps (ok %v), want 3: until the line emptied", steps, ok)
	}
	if h.electing() {
		t.Fatal("the line should be empty")
	}
	steps = 0
	h.awaitElections(time.Hour, time.Second, func(time.Duration) bool { steps++; return true })
	if steps != 0 {
		t.Fatalf("no line: waited %d steps, want 0", steps)
	}

	other := h.campaigns.Slot(func() {}) // a line again, that never empties
	if other.Begin(now, now.Add(time.Minute)) {
		t.Fatal("want a member in line")
	}
	steps = 0
	if !h.awaitElections(5*time.Second, time.Second, func(time.Duration) bool { steps++; return true }) || steps != 5 {
		t.Fatalf("a line that stays: waited %d steps, want the limit's 5", steps)
	}
	if h.awaitElections(5*time.Second, time.Second, func(time.Duration) bool { return false }) {
		t.Fatal("a sleep cut short (the loop's end) must end the wait with false")
	}
	if !(&Host{}).awaitElections(time.Hour, time.Second, func(time.Duration) bool { t.Fatal("slept without a bound"); return true }) {
		t.Fatal("no bound: want true")
	}
}
