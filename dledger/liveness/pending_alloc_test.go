package liveness

import (
	"fmt"
	"testing"
)

// TestPendingFrameAllocatesItsListsOnce: a frame of a mass election's hundreds of changes
// allocates its list of changes and its list in flight once each, at their length, not by
// appends that double (issue 29, halloc); the frames carry what they did.
func TestPendingFrameAllocatesItsListsOnce(t *testing.T) {
	var ps pendingSet
	epoch := uint64(0)
	fill := func() {
		for g := range 300 {
			epoch++
			ps.set(key{fmt.Sprintf("g%d", g), "n0"}, epoch)
		}
	}
	fill()
	seq := uint64(0)
	if f, _, _ := ps.frame(seq+1, epoch, 1024, 0); len(f) != 300 { // the scratch exists from now on
		t.Fatalf("frame of %d changes, want 300", len(f))
	}
	seq++
	ps.acked(seq)
	fill()
	keys := make([]key, 0, 300)
	for g := range 300 {
		keys = append(keys, key{fmt.Sprintf("g%d", g), "n0"})
	}
	allocs := testing.AllocsPerRun(20, func() {
		for _, k := range keys {
			epoch++
			ps.set(k, epoch)
		}
		seq++
		f, _, _ := ps.frame(seq, epoch, 1024, 0)
		if len(f) != 300 {
			t.Fatalf("frame of %d changes, want 300", len(f))
		}
		ps.lost(seq) // back to be sent: the entries stay, set allocates none
	})
	if allocs > 3 { // the frame's list, the list in flight, and the in-flight map's growth now and then
		t.Errorf("a frame of 300 changes made %v allocations", allocs)
	}
}
