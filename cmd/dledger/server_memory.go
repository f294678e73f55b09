package main

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// A host process returns to the OS the heap memory a burst of work left free (issue 29;
// docs/design.md, "What a member costs"; BENCHMARKS.md, "The cold start's heap, returned").
// A cold start of thousands of groups allocates far more at once than the host keeps (vote
// rounds, rpc frames and buffers, pending role events): once collected, the freed spans stay
// mapped, and Go's background scavenger returns them only slowly, so a settled host's RSS
// held the cold start's peak for a long time. Every idleHeapPoll the process reads the
// runtime's heap metrics (no stop-the-world); when the heap it keeps mapped exceeds the heap
// goal by more than a quarter of it and idleHeapMin (more than the heap will grow back to
// before its next collection) and at least idleHeapMin of it is free, it calls
// debug.FreeOSMemory once: a collection and a release of every free span, a few milliseconds
// per 10 MiB of live heap. A settled host keeps about its goal mapped, so this runs after a
// burst, not every cycle; and at most once per idleHeapGap polls, so a long burst (a cold
// start of 10,000 groups, churning on a loaded machine) pays for one forced collection a
// minute at most. It does not change GOGC: the heap still grows to twice what is live
// between collections (GOGC and GOMEMLIMIT are the operator's).

// idleHeapPoll is how often the free heap is looked at: rare enough to cost nothing idle.
const idleHeapPoll = 5 * time.Second

// idleHeapGap is the fewest polls between two releases (a minute).
const idleHeapGap = 12

// idleHeapMin is the free heap below which nothing is returned: a member process's heap is a
// few MiB, and a release that small is not worth a collection.
const idleHeapMin = 8 << 20

// heapUse is the heap's memory as the runtime reports it: mapped (in use or free, not
// returned to the OS), free (spans holding no object, not returned) and the goal of the
// current cycle.
type heapUse struct{ mapped, free, goal uint64 }

// idleHeapExcess: the heap keeps more mapped than its next cycle can use, enough of it free.
func idleHeapExcess(h heapUse) bool {
	return h.free > idleHeapMin && h.mapped > h.goal+max(idleHeapMin, h.goal/4)
}

// readHeapUse reads the process's heapUse.
func readHeapUse() heapUse {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	free := s[0].Value.Uint64()
	return heapUse{mapped: free + s[1].Value.Uint64() + s[2].Value.Uint64(), free: free, goal: s[3].Value.Uint64()}
}

// returnIdleHeap polls at every tick until stop is closed, and calls release when read
// reports an excess of free heap (idleHeapExcess), gap polls after the last release at the
// earliest.
func returnIdleHeap(stop <-chan struct{}, tick <-chan time.Time, gap int, read func() heapUse, release func()) {
	since := gap // polls since the last release
	for {
		select {
		case <-stop:
			return
		case <-tick:
			if since++; since >= gap && idleHeapExcess(read()) {
				release()
				since = 0
			}
		}
	}
}

// startReturningIdleHeap runs returnIdleHeap on the process's heap; the returned func stops it.
func startReturningIdleHeap() (stop func()) {
	done := make(chan struct{})
	t := time.NewTicker(idleHeapPoll)
	go returnIdleHeap(done, t.C, idleHeapGap, readHeapUse, debug.FreeOSMemory)
	return func() { t.Stop(); close(done) }
}
