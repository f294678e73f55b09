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
// GOGC=100's (a burst seen by its collections runs at the default pace, as before; a mass
// election the host announces, its start or a peer host gone, at gcPaceBurstPercent). It sets
// GOGC (debug.SetGCPercent), so it leaves the operator's GOGC and GOMEMLIMIT alone: with either
// in the environment it does nothing (gcPaceWanted).
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

// gcPaceBurstPercent is GOGC through a mass election the host announced (burst), for
// gcPaceBurstHold: headroom for three times the live heap, so that the election runs no
// collection. A survivor of a 10,000-group host's crash allocates 35-45 MB in its first 300 ms
// (some 12 KB a group it elects, about its live heap of 44-49 MB: BENCHMARKS.md, "hgc,
// 2026-11-28 (third session)"), from a heap at its settled goal, a tenth above the live heap, or
// more if an admin listing has just run; GOGC=100 collected once or twice in it (at 170-360 ms,
// 40-55 ms of CPU each), and a collection starts at 70 % of the headroom at the earliest (the runtime's
// trigger bound), so 100 % of the live heap is not enough and 300 % leaves room for a crash of a
// host that led a half more groups. It costs no memory the burst does not allocate: the heap
// grows by what the election allocates, and it is collected when the hold ends.
const gcPaceBurstPercent = 300

// gcPaceBurstHold is how long the burst percent holds at least: a 10,000-group host's crash
// is over in half a second on two cores (the first rounds start after the succession delay,
// 100 ms, so the host's campaign bound is still empty at first). Then it holds while the
// host's members still run or wait to run vote rounds (the pacer's busy: Host.Campaigning),
// looked at every gcPaceBurstStep, up to gcPaceBurstMax after the burst (a host whose rounds
// go on failing must not keep it for good; the runtime collects at the burst percent's goal
// meanwhile anyway). Then GOGC=100 (a timer, holdOver; or a poll, if it comes first), and the
// rest of the window goes as before: the polls do not lower it below 100 before a whole
// window has passed since the burst.
const (
	gcPaceBurstHold = time.Second
	gcPaceBurstStep = 250 * time.Millisecond
	gcPaceBurstMax  = 5 * time.Second
)

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
	polls   []gcSample  // the last gcPaceWindow+1 polls' samples, oldest first
	burstAt time.Time   // the last poll that saw a burst, or the last burst announced
	holdEnd time.Time   // the least end of the last burst announced (gcPaceBurstPercent)
	holdMax time.Time   // when it ends whatever busy says
	busy    func() bool // the host's members run vote rounds or wait to (nil: never)
	set     func(int)   // debug.SetGCPercent, or a test's
	stopped bool        // the process is stopping: GOGC=100 again, for good
	timed   bool        // a timer will end the hold (holdOver): one at a time, whatever the bursts
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
	p.endHoldLocked(s.at)
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
// thousands of groups elect here in the next half second): GOGC=gcPaceBurstPercent at once,
// GOGC=100 gcPaceBurstHold after it, or later while busy says the host's members still
// campaign, but never past gcPaceBurstMax after the burst that began the hold (holdOver, or a
// poll), and the polls do not lower it below 100 before a whole window has passed. A burst
// announced during a hold extends its least end, never its cap: a peer host that crashes
// again and again cannot keep the process at the burst percent. A poll sees a burst only up to
// a second after it began, by its collections, and a host's crash is over in half a second:
// the survivors ran it at the settled goal, collecting every few MiB, and the collector took
// 22-23 % of their CPU in it (BENCHMARKS.md, "hcpu, 2026-11-28 morning"); at GOGC=100 from the
// burst, they still collected once in it (gcPaceBurstPercent). It returns whether the caller
// must start the timer that ends the hold (endHoldLater): false while one runs.
func (p *gcPacer) burst(at time.Time) (startTimer bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.burstAt = at
	if p.percent != gcPaceBurstPercent {
		p.percent = gcPaceBurstPercent
		p.set(gcPaceBurstPercent)
		p.holdMax = at.Add(gcPaceBurstMax)
	}
	p.holdEnd = at.Add(gcPaceBurstHold)
	if p.holdEnd.After(p.holdMax) {
		p.holdEnd = p.holdMax
	}
	startTimer = !p.timed
	p.timed = true
	return startTimer
}

// holdOver is called gcPaceBurstHold after a burst, and then again after the delay it returns
// while that is not zero (gcBurst's timer): the burst percent ends when the election does,
// not at the next poll, up to a second later, while the host goes on allocating (a survivor
// of a 10,000-group crash grew its heap by 95 MB in the 1.7 s before a poll ended it: the
// crash, then the killed host's return).
func (p *gcPacer) holdOver(now time.Time) (again time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		p.timed = false
		return 0
	}
	again = p.endHoldLocked(now)
	p.timed = again > 0
	return again
}

// endHoldLocked puts GOGC=100 once the last burst's hold has ended (gcPaceBurstHold), or says
// when to look again (zero: no burst percent to end).
func (p *gcPacer) endHoldLocked(now time.Time) (again time.Duration) {
	switch {
	case p.percent <= 100:
		return 0
	case now.Before(p.holdEnd):
		return p.holdEnd.Sub(now)
	case now.Before(p.holdMax) && p.busy != nil && p.busy():
		return gcPaceBurstStep
	}
	p.percent = 100
	p.set(100)
	return 0
}

// settling: a burst was announced or seen and the pacer has not yet had a whole window of
// polls since, the one it may lower the percent at (polled); returnIdleHeap leaves an excess to
// the release of that lowering, in the same poll.
func (p *gcPacer) settling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := len(p.polls) == gcPaceWindow+1 && p.polls[0].at.After(p.burstAt)
	return !p.stopped && p.percent >= 100 && !p.burstAt.IsZero() && !full
}

// gcSettling is the process's pacer's settling (false without one).
func gcSettling() bool {
	p := processPacer.Load()
	return p != nil && p.settling()
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

// gcBurst tells the process's pacer, if it runs, that a mass election begins (burst), and ends
// the burst percent when its hold is over (holdOver, on a timer).
func gcBurst() {
	if p := processPacer.Load(); p != nil && p.burst(time.Now()) {
		endHoldLater(p, gcPaceBurstHold)
	}
}

// endHoldLater calls p.holdOver after d, and again as long as it asks.
func endHoldLater(p *gcPacer, d time.Duration) {
	time.AfterFunc(d, func() {
		if again := p.holdOver(time.Now()); again > 0 {
			endHoldLater(p, again)
		}
	})
}

// gcBurstAtStart begins the burst of a host's start, if gcPaceWanted, before it makes its
// members: GOGC=gcPaceBurstPercent at once, the time returned (zero without) for the pacer
// (startGCPacer) to hold it as any burst's, while the members' first elections run. A cold
// start of 10,000 groups grows the heap from nothing to some 50 MB live while its members elect
// (from a second after the start to two): at GOGC=100 a host collected a dozen times in its
// first two seconds, the last three of them, of 30-50 MB live heaps, some 100-170 ms of CPU
// each, in the elections.
func gcBurstAtStart() time.Time {
	if !gcPaceWanted(os.Getenv) {
		return time.Time{}
	}
	debug.SetGCPercent(gcPaceBurstPercent)
	return time.Now()
}

// startGCPacer starts the pacer on the process's collector, if gcPaceWanted, with busy (nil:
// none) for a burst's hold (gcPaceBurstHold), and holds the burst begun at started
// (gcBurstAtStart) unless that is zero: polled is for the idle-heap poll (nil without the
// pacer), paced says whether it paces now; stop puts back GOGC=100.
func startGCPacer(started time.Time, busy func() bool) (polled func() bool, paced func() bool, stop func()) {
	if !gcPaceWanted(os.Getenv) {
		return nil, nil, func() {}
	}
	p := newGCPacer(readGCSample(), func(pct int) { debug.SetGCPercent(pct) })
	p.busy = busy
	if !started.IsZero() && p.burst(started) {
		endHoldLater(p, time.Until(started.Add(gcPaceBurstHold)))
	}
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
