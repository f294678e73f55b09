package campaign

import (
	"testing"
	"time"
)

// TestBusy: a gate is busy while every place is taken or a member waits in line, and asking
// whether it is changes nothing (no place taken, nobody queued).
func TestBusy(t *testing.T) {
	now := time.Unix(0, 0)
	g := New(2)
	a, b, c, ask := g.Slot(func() {}), g.Slot(func() {}), g.Slot(func() {}), g.Slot(func() {})
	if ask.Busy() {
		t.Fatal("an empty gate is busy")
	}
	a.Begin(now, now.Add(time.Second))
	if ask.Busy() || g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("one of two places taken: busy %v, held %d, waiting %d", ask.Busy(), g.Held(), g.Waiting())
	}
	b.Begin(now, now.Add(time.Second))
	if !ask.Busy() {
		t.Fatal("every place taken, the gate is not busy")
	}
	c.Begin(now, now.Add(time.Second)) // waits
	a.End(now)                         // its place goes to c
	if !ask.Busy() || g.Held() != 2 {
		t.Fatalf("places given to the line: busy %v, held %d", ask.Busy(), g.Held())
	}
	b.End(now)
	if ask.Busy() || g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("a place free, nobody in line: busy %v, held %d, waiting %d", ask.Busy(), g.Held(), g.Waiting())
	}
}
