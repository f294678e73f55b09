package campaign

import (
	"testing"
	"time"
)

// TestGateHandsOnWithoutAllocating: a place given back and handed to the next in line
// allocates no list of the slots to wake: they are gathered on the stack (issue 29, halloc: a
// slice per End was thousands of allocations of a host in a crash's elections).
func TestGateHandsOnWithoutAllocating(t *testing.T) {
	g := New(1)
	woken := 0
	now := time.Unix(100, 0)
	until := now.Add(time.Second)
	var ss []*Slot
	for range 200 { // the first holds the place, the rest wait in line
		s := g.Slot(func() { woken++ })
		s.Begin(now, until)
		ss = append(ss, s)
	}
	turn := 0
	allocs := testing.AllocsPerRun(100, func() {
		ss[turn].End(now)            // the next in line is given the place and woken
		ss[turn+1].Begin(now, until) // and begins with it
		turn++
	})
	if allocs != 0 {
		t.Errorf("handing a place on made %v allocations", allocs)
	}
	if woken < turn { // the new holder, and the new first in line (RetryAt)
		t.Fatalf("%d slots woken in %d turns, want one per turn at least", woken, turn)
	}
}
