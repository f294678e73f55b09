package main

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// A quiet host's heap goal near its live heap (issue 29; docs/design.md, "A settled host's
// heap goal"). At GOGC=100 the collector lets the heap grow to twice what the last collection found
// live before it collects again, and the runtime keeps that heap mapped: a settled host of
// 10,000 groups holds some 80 MiB live and so about 160 MiB of heap, most of a 187-224 MiB RSS.
// On a settled host that allocates little (the liveness frames, a quiet refresh now and then, a
// scrape) most of that headroom waits for garbage that comes slowly, and the collector would run
// seldom with far less of it. (A settled 10,000-group host allocates about 0.04 MB a second
// since the balancer keeps its view between plans; before that, 3-5 MB a second kept every
// host at GOGC=100: BENCHMARKS.md, "RSS at 10,000 groups".) The pacer gives the heap the headroom its allocation rate needs:
// enough for gcPaceEvery of allocation at the rate it saw (the runtime collects at least every
// two minutes anyway: a heap collected that often costs no more than an idle runtime's forced
// collections), at least a tenth of the live heap and gcPaceHeadroomMin, and never more than
// GOGC=100's (a burst, a cold start, a failover of thousands of groups, runs at the default
// pace, as before). It sets GOGC (debug.SetGCPercent), so it leaves the operator's GOGC and
// GOMEMLIMIT alone: with either in the environment it does nothing (gcPaceWanted).
//
// It looks at every idle-heap poll (server_memory.go, every second while it paces). It takes
// the host's steady allocation rate, the average over the last gcPaceWindow polls (long
// enough to take in the balancer's rounds, every 3 s after a change, and a scrape: the
// headroom is for what the host allocates on average, so that it collects about every
// gcPaceEvery whatever the pattern), and sets the percent that rate wants, lower or higher. A
// poll that saw gcPaceBurstCycles collections or more since the previous one is a burst (at
// its paced goal a host collects about every gcPaceEvery; a cold start or a failover at a
// small goal collects several times a second, each collection of a 10,000-group heap 100-250
// ms of CPU): the percent goes up at once to what the poll's rate wants, and the polls do
// not lower it again until a whole window has passed since. (A cleanup re-armed at every
// collection, to react within a collection instead of a poll, was tried: on a host at one
// processor in a failover its calls lagged the collections by seconds. The least of the last
// two polls' rates, instead of the average, lowered the goal a second after a burst but sized
// the headroom for the quiet seconds between the balancer's rounds: a 3,000-group host then
// collected every 3 s, at 1-1.5 % of a core.)

// gcPaceEvery is the collection interval a quiet host's headroom is sized for, at the rate it
// allocates: the runtime's own forced period (two minutes), so a settled host collects about as
// often as it would anyway.
const gcPaceEvery = 2 * time.Minute

// gcPaceHeadroomMin is the least headroom above the live heap: below some 40 MiB of live heap
// (a member process, a host of a few thousand groups) the tenth is smaller, and a few MiB of
// headroom cost nothing worth a collection.
const gcPaceHeadroomMin = 4 << 20

// gcPaceMinPercent is the least GOGC: a tenth of the live heap.
const gcPaceMinPercent = 10

// gcPaceWindow is how many polls the steady rate is the average of (ten seconds).
const gcPaceWindow = 10

// gcPaceBurstCycles: this many collections between two polls are a burst.
const gcPaceBurstCycles = 2

// gcPercentFor is the GOGC a heap of live bytes allocating rate bytes a second wants: its
// headroom, max(rate x gcPaceEvery, live/10, gcPaceHeadroomMin), as a percent of live, within
// [gcPaceMinPercent, 100].
func gcPercentFor(live uint64, rate float64) int {
	if live < pacedHeapGoal/2 || math.IsNaN(rate) || rate < 0 {
		return 100 // a member process's heap of a few MiB: left alone, polled every 5 s
	}
	head := max(rate*gcPaceEvery.Seconds(), float64(gcPaceHeadroomMin))
	p := math.Ceil(100 * head / float64(live))
	if p >= 100 {
		return 100
	}
	return max(int(p), gcPaceMinPercent)
}

// gcSample is what the pacer reads of the runtime: the heap the last collection marked live,
// every byte allocated so far, and the collections so far.
type gcSample struct {
	at                   time.Time
	live, allocs, cycles uint64
}

// gcPacer holds the percent it set and the samples the rates are taken from.
type gcPacer struct {
	mu      sync.Mutex
	percent int
	polls   []gcSample // the last gcPaceWindow+1 polls' samples, oldest first
	burstAt time.Time  // the last poll that saw a burst
	set     func(int)  // debug.SetGCPercent, or a test's
	stopped bool       // the process is stopping: GOGC=100 again, for good
}

func newGCPacer(now gcSample, set func(int)) *gcPacer {
	return &gcPacer{percent: 100, polls: []gcSample{now}, set: set}
}

// rate is bytes allocated a second from a to b, NaN if no time passed.
func rate(a, b gcSample) float64 {
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 || b.allocs < a.allocs {
		return math.NaN()
	}
	return float64(b.allocs-a.allocs) / d
}

// polled: on a burst (gcPaceBurstCycles collections since the previous poll), the percent the
// poll's rate wants if higher; otherwise the percent for the steady rate (the average over the
// window), lower or higher, but not lower before a whole window has passed since the first
// poll or the last burst. It reports whether it lowered the percent (the heap above the new
// goal is worth returning at once).
func (p *gcPacer) polled(s gcSample) (lowered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.polls[len(p.polls)-1]
	if p.polls = append(p.polls, s); len(p.polls) > gcPaceWindow+1 {
		p.polls = append(p.polls[:0], p.polls[1:]...)
	}
	if p.stopped {
		return false
	}
	if s.cycles >= prev.cycles+gcPaceBurstCycles {
		p.burstAt = s.at
		if want := gcPercentFor(s.live, rate(prev, s)); want > p.percent {
			p.percent = want
			p.set(want)
		}
		return false
	}
	r := rate(p.polls[0], s)
	if math.IsNaN(r) {
		return false
	}
	want := gcPercentFor(s.live, r)
	full := len(p.polls) == gcPaceWindow+1 && p.polls[0].at.After(p.burstAt)
	if want == p.percent || want < p.percent && !full {
		return false
	}
	lowered = want < p.percent
	p.percent = want
	p.set(want)
	return lowered
}

// burst is told of a mass election before it allocates (a peer host's process is gone: its
// thousands of groups elect here in the next half second): GOGC=100 at once, and the polls do not
// lower it before a whole window has passed. A poll sees a burst only up to a second after it
// began, by its collections, and a host's crash is over in half a second: the survivors ran it
// at the settled goal, collecting every few MiB, and the collector took 22-23 % of their CPU in
// it (BENCHMARKS.md, "hcpu, 2026-11-28 morning").
func (p *gcPacer) burst(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.burstAt = at
	if p.percent != 100 {
		p.percent = 100
		p.set(100)
	}
}

// paced: the percent is under 100 (the poll then runs every second whatever the goal).
func (p *gcPacer) paced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.percent < 100
}

// gcPaceWanted: the pacer runs unless the operator set the collector's pace (GOGC or
// GOMEMLIMIT in the environment).
func gcPaceWanted(getenv func(string) string) bool {
	return getenv("GOGC") == "" && getenv("GOMEMLIMIT") == ""
}

var gcPaceMetrics = []string{"/gc/heap/live:bytes", "/gc/heap/allocs:bytes", "/gc/cycles/total:gc-cycles"}

// readGCSample reads the process's gcSample.
func readGCSample() gcSample {
	s := make([]metrics.Sample, len(gcPaceMetrics))
	for i, n := range gcPaceMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return gcSample{at: time.Now(), live: s[0].Value.Uint64(), allocs: s[1].Value.Uint64(), cycles: s[2].Value.Uint64()}
}

// processPacer is the process's pacer while it runs (startGCPacer), for gcBurst; nil without.
var processPacer atomic.Pointer[gcPacer]

// gcBurst tells the process's pacer, if it runs, that a mass election begins (burst).
func gcBurst() {
	if p := processPacer.Load(); p != nil {
		p.burst(time.Now())
	}
}

// startGCPacer starts the pacer on the process's collector, if gcPaceWanted: polled is for the
// idle-heap poll (nil without the pacer), paced says whether it paces now; stop puts back
// GOGC=100.
func startGCPacer() (polled func() bool, paced func() bool, stop func()) {
	if !gcPaceWanted(os.Getenv) {
		return nil, nil, func() {}
	}
	p := newGCPacer(readGCSample(), func(pct int) { debug.SetGCPercent(pct) })
	processPacer.Store(p)
	return func() bool { return p.polled(readGCSample()) }, p.paced, func() {
		processPacer.CompareAndSwap(p, nil)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stopped = true
		if p.percent != 100 {
			p.percent = 100
			debug.SetGCPercent(100)
		}
	}
}
