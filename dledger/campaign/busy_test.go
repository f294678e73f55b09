package campaign

import (
	"testing"
	"time"
)

// TestBusy: a gate is busy while every place is taken or a member waits in line, quiet while
// no place is taken and nobody waits, and asking either changes nothing (no place taken,
// nobody queued).
func TestBusy(t *testing.T) {
	now := time.Unix(0, 0)
	g := New(2)
	a, b, c, ask := g.Slot(func() {}), g.Slot(func() {}), g.Slot(func() {}), g.Slot(func() {})
	if ask.Busy(now) || !ask.Quiet(now) {
		t.Fatalf("an empty gate: busy %v, quiet %v", ask.Busy(now), ask.Quiet(now))
	}
	a.Begin(now, now.Add(time.Second))
	if ask.Busy(now) || ask.Quiet(now) || g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("one of two places taken: busy %v, quiet %v, held %d, waiting %d", ask.Busy(now), ask.Quiet(now), g.Held(), g.Waiting())
	}
	b.Begin(now, now.Add(time.Second))
	if !ask.Busy(now) {
		t.Fatal("every place taken, the gate is not busy")
	}
	c.Begin(now, now.Add(time.Second)) // waits
	a.End(now)                         // its place goes to c
	if !ask.Busy(now) || g.Held() != 2 {
		t.Fatalf("places given to the line: busy %v, held %d", ask.Busy(now), g.Held())
	}
	b.End(now)
	if ask.Busy(now) || g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("a place free, nobody in line: busy %v, held %d, waiting %d", ask.Busy(now), g.Held(), g.Waiting())
	}
	c.End(now)
	if !ask.Quiet(now) {
		t.Fatal("every place given back, nobody in line: not quiet")
	}
}

// TestBusyLeavesOutExpiredPlaces: a place past its until (a round that ran out its time, a
// holder that never gave it back) is neither busy nor un-quiet, as the first Begin on a full
// gate takes it back. Counted, a stuck place kept every later successor of its host deferring
// its whole window (dledger's successionDefers) though a Begin would have had a place at once.
func TestBusyLeavesOutExpiredPlaces(t *testing.T) {
	now := time.Unix(0, 0)
	g := New(1)
	stuck, ask := g.Slot(func() {}), g.Slot(func() {})
	stuck.Begin(now, now.Add(time.Second))
	if !ask.Busy(now) || ask.Quiet(now) {
		t.Fatalf("the one place held: busy %v, quiet %v", ask.Busy(now), ask.Quiet(now))
	}
	later := now.Add(time.Second + time.Nanosecond)
	if ask.Busy(later) || !ask.Quiet(later) {
		t.Fatalf("the one place past its until: busy %v, quiet %v, want not busy and quiet", ask.Busy(later), ask.Quiet(later))
	}
	if !ask.Begin(later, later.Add(time.Second)) {
		t.Fatal("Begin found no place: then the gate was busy")
	}
}
