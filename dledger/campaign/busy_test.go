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
	if ask.Busy() || !ask.Quiet() {
		t.Fatalf("an empty gate: busy %v, quiet %v", ask.Busy(), ask.Quiet())
	}
	a.Begin(now, now.Add(time.Second))
	if ask.Busy() || ask.Quiet() || g.Held() != 1 || g.Waiting() != 0 {
		t.Fatalf("one of two places taken: busy %v, quiet %v, held %d, waiting %d", ask.Busy(), ask.Quiet(), g.Held(), g.Waiting())
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
	c.End(now)
	if !ask.Quiet() {
		t.Fatal("every place given back, nobody in line: not quiet")
	}
}
