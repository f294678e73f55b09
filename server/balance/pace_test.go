package balance

import (
	"testing"
	"time"
)

const budget = 200 * time.Millisecond

// The bound grows by one per fast transfer while it is in use (doubling per round, from min
// to max), never beyond max, and not at all while it is not in use.
func TestPaceGrowsWhileTransfersAreFast(t *testing.T) {
	p := NewPace(4, 64)
	if p.Limit() != 4 {
		t.Fatalf("starts at %d, want 4", p.Limit())
	}
	rounds := 0
	for p.Limit() < 64 {
		n := p.Limit()
		for range n { // a round: as many fast transfers as the bound, all started full
			p.Done(10*time.Millisecond, budget, true)
		}
		rounds++
		if rounds > 10 {
			t.Fatalf("after %d rounds of fast transfers the bound is %d", rounds, p.Limit())
		}
	}
	if rounds != 4 { // 4 -> 8 -> 16 -> 32 -> 64
		t.Fatalf("reached 64 in %d rounds, want 4 (doubling per round)", rounds)
	}
	p.Done(time.Millisecond, budget, true)
	if p.Limit() != 64 {
		t.Fatalf("grew past max: %d", p.Limit())
	}
	q := NewPace(4, 64)
	for range 100 {
		q.Done(time.Millisecond, budget, false) // never more than a few in flight: no evidence
	}
	if q.Limit() != 4 {
		t.Fatalf("a bound not in use grew to %d", q.Limit())
	}
}

// A slow transfer halves the bound, once per round: the slow answers of transfers that ran
// together are one signal, and a round is the transfers in flight when the bound halved (the
// bound before it), not the halved bound's worth: 64 slow transfers started together halve
// it once, not four times. It never goes below min.
func TestPaceHalvesOncePerRoundWhenSlow(t *testing.T) {
	p := NewPace(4, 64)
	for p.Limit() < 64 {
		p.Done(time.Millisecond, budget, true)
	}
	p.Done(budget+time.Millisecond, budget, true)
	if p.Limit() != 32 {
		t.Fatalf("after a slow transfer: %d, want 32", p.Limit())
	}
	for range 63 { // the rest of the round of 64, just as slow
		p.Done(time.Second, budget, true)
	}
	if p.Limit() != 32 {
		t.Fatalf("the same round's slow transfers cut again: %d, want 32", p.Limit())
	}
	p.Done(time.Second, budget, true) // the next round's first
	if p.Limit() != 16 {
		t.Fatalf("the next round's slow transfer: %d, want 16", p.Limit())
	}
	for range 31 { // the rest of the round of 32
		p.Done(time.Second, budget, true)
	}
	if p.Limit() != 16 {
		t.Fatalf("the round of 32's slow transfers cut again: %d, want 16", p.Limit())
	}
	for range 100 {
		p.Done(time.Second, budget, true)
	}
	if p.Limit() != 4 {
		t.Fatalf("slow forever: %d, want the minimum 4", p.Limit())
	}
	if p.Done(budget, budget, true); p.Limit() != 5 { // at the budget is within it
		t.Fatalf("a transfer of exactly the budget: %d, want 5", p.Limit())
	}
	if NewPace(0, 0).Limit() != 1 {
		t.Fatal("a pace allows at least one transfer")
	}
}
