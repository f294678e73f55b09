package main

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// TestIdleHeapExcess is the rule of returnIdleHeap: a heap that keeps more than its goal and a
// quarter mapped, with enough of it free, is returned; a settled one (about its goal mapped), a
// small process and a heap whose excess is in use are not. Fails if the rule releases every
// cycle (the settled row) or never after a burst.
func TestIdleHeapExcess(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		h    heapUse
		want bool
	}{
		{"after a cold start's burst", heapUse{mapped: 43 * mib, free: 20 * mib, goal: 32 * mib}, true},
		{"settled: about the goal mapped", heapUse{mapped: 36 * mib, free: 8 * mib, goal: 35 * mib}, false},
		{"a member process's small heap", heapUse{mapped: 14 * mib, free: 7 * mib, goal: 4 * mib}, false},
		{"the excess is in use, little free", heapUse{mapped: 60 * mib, free: 4 * mib, goal: 32 * mib}, false},
		{"a large host's burst", heapUse{mapped: 600 * mib, free: 250 * mib, goal: 300 * mib}, true},
		{"a large host settled", heapUse{mapped: 330 * mib, free: 60 * mib, goal: 300 * mib}, false},
	} {
		if got := idleHeapExcess(c.h); got != c.want {
			t.Errorf("%s: %+v: excess %v, want %v", c.name, c.h, got, c.want)
		}
	}
}

// TestReadHeapUseSeesATransient: the runtime metrics readHeapUse reads are the ones named
// (a wrong name reads as nothing), and they show what the rule is for: a transient's heap,
// collected, stays mapped as excess until it is returned, and debug.FreeOSMemory returns it.
func TestReadHeapUseSeesATransient(t *testing.T) {
	keep := make([][]byte, 0, 64<<10)
	for range 64 << 10 { // 64 MiB of small objects: the spans of a cold start's buffers
		keep = append(keep, make([]byte, 1024))
	}
	runtime.GC() // the goal grows to twice the transient
	runtime.KeepAlive(keep)
	keep = nil
	runtime.GC() // collected: the spans are free, still mapped
	if h := readHeapUse(); !idleHeapExcess(h) {
		t.Fatalf("after a 64 MiB transient was collected: %+v, no excess", h)
	}
	debug.FreeOSMemory()
	if h := readHeapUse(); idleHeapExcess(h) {
		t.Fatalf("after FreeOSMemory: %+v, still an excess", h)
	}
}

// TestReturnIdleHeapReleasesOnExcess runs the loop on ticks of its own: it releases at the
// first poll whose read shows an excess (not before), then not again until gap polls have
// passed though the excess stays (a long burst pays one release per gap), and returns once
// stopped. With gap 4 and the excess from the third poll on: releases at polls 3 and 7.
func TestReturnIdleHeapReleasesOnExcess(t *testing.T) {
	const mib, gap, ticks = 1 << 20, 4, 20
	tick := make(chan time.Time, ticks)
	for range ticks {
		tick <- time.Time{}
	}
	close(tick)                                      // then a poll at every turn: the loop never waits
	polls := func() int { return ticks - len(tick) } // ticks taken so far
	stop := make(chan struct{})
	var releasedAt []int
	read := func() heapUse {
		if polls() < 3 {
			return heapUse{mapped: 36 * mib, free: 8 * mib, goal: 35 * mib} // settled
		}
		return heapUse{mapped: 43 * mib, free: 20 * mib, goal: 32 * mib} // a burst's excess
	}
	returnIdleHeap(stop, tick, gap, nil, nil, read, func() {
		if len(releasedAt) == 2 {
			return // stopped; the loop may take a few more (ready) ticks before it sees stop
		}
		if releasedAt = append(releasedAt, polls()); len(releasedAt) == 2 {
			close(stop)
		}
	})
	if want := []int{3, 3 + gap}; !slices.Equal(releasedAt, want) {
		t.Errorf("released at polls %v, want %v", releasedAt, want)
	}
}

// TestReturnIdleHeapLeavesAnExcessToTheLoweringWhileSettling: while the pacer settles after a
// burst (settling), an excess is not released: the release of the pacer's lowering, at the
// window's end, returns more. Fails if the excess is released within the window (after a cold
// start's burst at GOGC=300 that release, at GOGC=100's goal, spent the gap, and the settled
// host kept 5-10 MiB more than one released at the lowering).
func TestReturnIdleHeapLeavesAnExcessToTheLoweringWhileSettling(t *testing.T) {
	const mib, gap, ticks = 1 << 20, 4, 20
	tick, polls := filledTicks(ticks)
	stop := make(chan struct{})
	var releasedAt []int
	read := func() heapUse { return heapUse{mapped: 140 * mib, free: 60 * mib, goal: 96 * mib} }
	settling := func() bool { return polls() < 6 }
	returnIdleHeap(stop, tick, gap, nil, settling, read, func() {
		if len(releasedAt) == 0 {
			releasedAt = append(releasedAt, polls())
			close(stop)
		}
	})
	if want := []int{6}; !slices.Equal(releasedAt, want) {
		t.Errorf("released at polls %v, want %v (not while settling)", releasedAt, want)
	}
}

// filledTicks is a closed channel of n ticks for an idle-heap poll loop, and how many it has
// taken so far.
func filledTicks(n int) (<-chan time.Time, func() int) {
	tick := make(chan time.Time, n)
	for range n {
		tick <- time.Time{}
	}
	close(tick)
	return tick, func() int { return n - len(tick) }
}
