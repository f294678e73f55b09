package rpc

import (
	"reflect"
	"testing"
)

// TestPendingMapFreedAfterBurst: a peer's pending map that a burst grew (a cold start's
// thousands of calls on a host link) is replaced once the burst is answered, so its memory
// is not kept for the rest of the run (issue 29); a map that stayed small is kept, and the
// peak starts again from the next call.
func TestPendingMapFreedAfterBurst(t *testing.T) {
	for _, tc := range []struct {
		calls    int
		replaced bool
	}{{calls: shrinkAbove, replaced: false}, {calls: 10 * shrinkAbove, replaced: true}} {
		p := &peer{pending: map[uint64]*call{}}
		for id := uint64(1); id <= uint64(tc.calls); id++ {
			p.pending[id] = &call{}
			p.peak = max(p.peak, len(p.pending)) // as submit does
		}
		before := reflect.ValueOf(p.pending).UnsafePointer()
		for id := uint64(1); id <= uint64(tc.calls); id++ {
			if p.take(id) == nil {
				t.Fatalf("call %d was not pending", id)
			}
		}
		if got := reflect.ValueOf(p.pending).UnsafePointer() != before; got != tc.replaced {
			t.Errorf("%d calls pending at once: map replaced %v, want %v", tc.calls, got, tc.replaced)
		}
		if p.peak != 0 || len(p.pending) != 0 {
			t.Errorf("after the burst: peak %d, %d pending; want 0, 0", p.peak, len(p.pending))
		}
	}
}
