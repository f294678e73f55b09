package main

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
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

// TestReturnIdleHeapReleasesOnExcess: the loop releases when a read shows an excess (and not
// before), and returns once stopped.
func TestReturnIdleHeapReleasesOnExcess(t *testing.T) {
	const mib = 1 << 20
	var reads atomic.Int64
	released := make(chan int64, 1)
	read := func() heapUse {
		if reads.Add(1) < 3 {
			return heapUse{mapped: 36 * mib, free: 8 * mib, goal: 35 * mib} // settled
		}
		return heapUse{mapped: 43 * mib, free: 20 * mib, goal: 32 * mib} // a burst's excess
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		returnIdleHeap(stop, time.Millisecond, read, func() {
			select {
			case released <- reads.Load():
			default:
			}
		})
	}()
	select {
	case n := <-released:
		if n < 3 {
			t.Errorf("released at read %d, before any excess", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("no release after an excess")
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("returnIdleHeap did not return once stopped")
	}
}
