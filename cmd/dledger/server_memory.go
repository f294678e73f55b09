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
// minute at most. By itself it does not change GOGC; the GC pacer (server_gcpace.go), polled
// here, does, unless the operator set GOGC or GOMEMLIMIT.

// idleHeapPoll is how often the free heap and the allocation rate (the GC pacer,
// server_gcpace.go) are looked at while the heap goal is at least pacedHeapGoal: a read of a
// few runtime metrics, a wake-up a second, and while the pacer paces. Otherwise (a member
// process, whose heap of a few MiB the pacer leaves at GOGC=100) every idleHeapPollSmall, as
// before the pacer: a member's idle cost is counted in wake-ups (docs/design.md, "What an
// idle member costs").
const (
	idleHeapPoll      = time.Second
	idleHeapPollSmall = 5 * time.Second
	pacedHeapGoal     = 32 << 20
)

// idleHeapGap is the fewest polls between two releases (a minute at idleHeapPoll, five at
// idleHeapPollSmall, where the heap is small and a release rarely due).
const idleHeapGap = 60

// idleHeapMin is the free heap below which nothing is returned: a member process's heap is a
// few MiB, and a release that small is not worth a collection.
const idleHeapMin = 8 << 20

// heapUse is the heap's memory as the runtime reports it: mapped (in use or free, not
// returned to the OS), free (spans holding no object, not returned) and the goal of the
// current cycle.
type heapUse struct{ mapped, free, goal uint64 }

// idleHeapExcess: the heap keeps more mapped than its next cycle can use, enough of it free.
func idleHeapExcess(h heapUse) bool {
	return h.free > idleHeapMin && aboveGoal(h)
}

// aboveGoal: the heap keeps more mapped than its next cycle can use, free or garbage (after the
// pacer lowered the goal, the garbage above it is collected by the release's collection).
func aboveGoal(h heapUse) bool { return h.mapped > h.goal+max(idleHeapMin, h.goal/4) }

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
// earliest; or when pace (the GC pacer's poll, server_gcpace.go; nil without it) has just
// lowered the heap goal and the heap is above the new goal (aboveGoal), gap polls after the
// last such release at the earliest: a settled host's RSS then falls to the smaller goal now,
// not as the background scavenger gets to it, and a pacer that lowers again and again (a host
// between bursts) pays for one forced collection a minute at most.
//
// While settling (nil: never) says a burst's window is open (server_gcpace.go: the pacer lowers
// the goal at its end, and its release then returns the heap above the lower goal), an excess
// is left for it: a release at GOGC=100's goal right after a cold start's burst (its heap at
// GOGC=300 far above that goal) spent the gap, and the lowering after it found too little
// above the lower goal to release, so the settled host kept 5-10 MiB more.
func returnIdleHeap(stop <-chan struct{}, tick <-chan time.Time, gap int, pace func() bool, settling func() bool, read func() heapUse, release func()) {
	since, sinceLowered := gap, gap // polls since the last release, and the last release on a lowering
	for {
		select {
		case <-stop:
			return
		case <-tick:
			since++
			sinceLowered++
			lowered := pace != nil && pace()
			h := read()
			switch {
			case since >= gap && idleHeapExcess(h) && (settling == nil || !settling()):
			case lowered && sinceLowered >= gap && aboveGoal(h):
				sinceLowered = 0
			default:
				continue
			}
			release()
			since = 0
		}
	}
}

// startReturningIdleHeap runs returnIdleHeap on the process's heap, with the GC pacer
// (startGCPacer: busy for its bursts' hold, the burst begun at started by gcBurstAtStart if
// not zero) unless the operator set GOGC or GOMEMLIMIT; the returned func stops both.
func startReturningIdleHeap(started time.Time, busy func() bool) (stop func()) {
	done := make(chan struct{})
	t := time.NewTicker(idleHeapPollSmall)
	polled, paced, stopPacing := startGCPacer(started, busy)
	var pace, settling func() bool
	if polled != nil {
		settling = gcSettling
		period := idleHeapPollSmall
		pace = func() bool {
			lowered := polled()
			if p := idleHeapPollFor(readHeapUse().goal, paced()); p != period {
				period = p
				t.Reset(p)
			}
			return lowered
		}
	}
	go returnIdleHeap(done, t.C, idleHeapGap, pace, settling, readHeapUse, debug.FreeOSMemory)
	return func() { t.Stop(); close(done); stopPacing() }
}

// idleHeapPollFor is the poll period for a heap goal: every second from pacedHeapGoal up, and
// while the pacer paces (a burst must be seen within a second, whatever the goal).
func idleHeapPollFor(goal uint64, paced bool) time.Duration {
	if paced || goal >= pacedHeapGoal {
		return idleHeapPoll
	}
	return idleHeapPollSmall
}
