package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGCPercentFor is the pacer's rule: a settled large host (little allocation, a large live
// heap) gets a goal near its live heap, never under a tenth above it; a burst, a small process
// and a heap the runtime has not measured keep GOGC=100. Fails if the headroom is not sized
// from the rate (the 10,000-group rows), or if a burst or a member process is paced.
func TestGCPercentFor(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	for _, c := range []struct {
		name string
		live uint64
		rate float64
		want int
	}{
		{"a settled 10,000-group host", 80 * mib, 256 * kib, 38},       // 30 MiB of headroom for 2 min at 256 KiB/s
		{"a silent 10,000-group host: a tenth", 80 * mib, 1 * kib, 10}, // 4 MiB, 5 %: the floor
		{"a settled 3,000-group host", 25 * mib, 70 * kib, 33},         // 8.2 MiB
		{"a burst: a cold start", 80 * mib, 40 * mib, 100},
		{"the balancer's rounds, 3 MiB/s", 80 * mib, 3 * mib, 100},
		{"a member process: 4 MiB is more than its heap", 3 * mib, 1 * kib, 100},
		{"a member process of 10 MiB: left alone (polled every 5 s)", 10 * mib, 1 * kib, 100},
		{"the least heap paced: 16 MiB", 16 * mib, 1 * kib, 25},
		{"a heap not measured yet", 0, 1 * kib, 100},
		{"no rate", 80 * mib, -1, 100},
	} {
		if got := gcPercentFor(c.live, c.rate); got != c.want {
			t.Errorf("%s: live %d MiB, %.0f KiB/s: GOGC %d, want %d", c.name, c.live/mib, c.rate/kib, got, c.want)
		}
	}
}

// TestGCPacerLowersOnQuietPollsRaisesOnBursts: a poll sets the percent the window's average
// rate wants, lower only once a whole window of polls has passed since the start or the last
// burst, and says when it lowered it; a poll that saw two collections or more since the
// previous one (a burst) raises it at once to what that poll's rate wants; nothing is set once
// stopped. Fails if the goal is lowered on a window's quiet seconds between periodic rounds
// (the balancer's: the headroom must hold their average), if a burst waits for the window, or
// if the polls lower it within a window of a burst.
func TestGCPacerLowersOnQuietPollsRaisesOnBursts(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	t0 := time.Unix(1000, 0)
	var allocs, cycles uint64 = 1000 * mib, 50
	at := func(s float64, add, gcs uint64) gcSample {
		allocs, cycles = allocs+add, cycles+gcs
		return gcSample{at: t0.Add(time.Duration(s * float64(time.Second))), live: 80 * mib, allocs: allocs, cycles: cycles}
	}
	var set []int
	p := newGCPacer(at(0, 0, 0), func(pct int) { set = append(set, pct) })
	poll := func(s float64, add, gcs uint64, wantLowered bool) {
		t.Helper()
		if got := p.polled(at(s, add, gcs)); got != wantLowered {
			t.Fatalf("poll at %v s: lowered %v, want %v", s, got, wantLowered)
		}
	}
	for s := 1.0; s < 10; s++ { // quiet, but no whole window yet
		poll(s, 1*kib, 0, false)
	}
	poll(10, 1*kib, 0, true) // 1 KiB/s over ten seconds: the floor, a tenth
	// The balancer's rounds: 3 MiB every third second, quiet between; their average (1 MiB/s)
	// wants 100 % within the window, though most of its seconds are quiet.
	for s := 11.0; s <= 20; s++ {
		add := uint64(1 * kib)
		if int(s)%3 == 0 {
			add = 3 * mib
		}
		poll(s, add, 0, false)
	}
	poll(21, 20*mib, 3, false)    // a burst: three collections in the second
	for s := 22.0; s <= 31; s++ { // quiet again: not lowered within a window of the burst
		poll(s, 256*kib, 0, false)
	}
	poll(32, 256*kib, 0, true) // the window 22-32 s: 256 KiB/s
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.polled(at(33, 100*mib, 5))
	// 10: the quiet window; 46, 91, 100: the rounds' average, raised as they fill the window;
	// 38: 256 KiB/s; nothing once stopped.
	if want := []int{10, 46, 91, 100, 38}; !slices.Equal(set, want) {
		t.Errorf("percents set %v, want %v", set, want)
	}
}

// TestGCPaceWanted: the operator's GOGC or GOMEMLIMIT turns the pacer off.
func TestGCPaceWanted(t *testing.T) {
	for env, want := range map[string]bool{"": true, "GOGC": false, "GOMEMLIMIT": false, "GOMAXPROCS": true} {
		getenv := func(k string) string {
			if k == env {
				return "50"
			}
			return ""
		}
		if got := gcPaceWanted(getenv); got != want {
			t.Errorf("with %q set: wanted %v, want %v", env, got, want)
		}
	}
}

// TestGCPacerSetsTheRuntimesGOGC runs the pacer on this process's collector: the metrics it
// reads are the ones named (a wrong name reads 0 and the live heap 0 wants GOGC=100), and the
// percent it sets is the runtime's (/gc/gogc:percent). A 64 MiB live heap allocating nothing
// over a minute wants the floor.
func TestGCPacerSetsTheRuntimesGOGC(t *testing.T) {
	if !gcPaceWanted(os.Getenv) {
		t.Skip("GOGC or GOMEMLIMIT set for this test process")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	keep := make([][]byte, 0, 64<<10)
	for range 64 << 10 {
		keep = append(keep, make([]byte, 1024))
	}
	runtime.GC() // the live heap now holds keep
	p := newGCPacer(readGCSample(), func(pct int) { debug.SetGCPercent(pct) })
	var s gcSample
	for i := range gcPaceWindow { // a window of polls, as if a minute had passed at each
		s = readGCSample()
		s.at = s.at.Add(time.Duration(i+1) * time.Minute)
		if i < gcPaceWindow-1 {
			p.polled(s)
		}
	}
	if !p.polled(s) {
		t.Fatalf("a quiet minute of a %d MiB live heap did not lower GOGC", s.live>>20)
	}
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(m)
	if got := m[0].Value.Uint64(); got != uint64(gcPaceMinPercent) {
		t.Errorf("runtime GOGC %d, want %d (live %d MiB)", got, gcPaceMinPercent, s.live>>20)
	}
	runtime.KeepAlive(keep)
}

// TestReturnIdleHeapReleasesWhenThePacerLowers: a poll at which the pacer lowered the goal
// releases at once (within the gap since the last release for an excess) if the heap is above
// the new goal, and not if it is not, nor again within the gap. With gap 12: the excess
// releases at poll 1, the pacer lowers at polls 3 (heap above the goal: released), 5 (heap at
// the goal: not) and 6 (above it again, within the gap since poll 3: not).
func TestReturnIdleHeapReleasesWhenThePacerLowers(t *testing.T) {
	const mib, gap, ticks = 1 << 20, 12, 8
	tick, polls := filledTicks(ticks)
	stop := make(chan struct{})
	var releasedAt []int
	pace := func() bool { return polls() == 3 || polls() == 5 || polls() == 6 }
	read := func() heapUse {
		switch polls() {
		case 1:
			return heapUse{mapped: 43 * mib, free: 20 * mib, goal: 32 * mib} // a burst's excess
		case 3, 6:
			return heapUse{mapped: 160 * mib, free: 2 * mib, goal: 88 * mib} // lowered: garbage above the goal
		}
		return heapUse{mapped: 36 * mib, free: 8 * mib, goal: 35 * mib}
	}
	returnIdleHeap(stop, tick, gap, pace, nil, read, func() {
		releasedAt = append(releasedAt, polls())
		if len(releasedAt) == 2 {
			go func() { // let polls 4-8 be taken, then stop
				for len(tick) > 0 {
					runtime.Gosched()
				}
				close(stop)
			}()
		}
	})
	if want := []int{1, 3}; !slices.Equal(releasedAt, want) {
		t.Errorf("released at polls %v, want %v", releasedAt, want)
	}
}

// processWideGC are the runtime's process-wide memory settings: a library (server.Host in a
// broker's process) must not change them behind its embedder's back; `dledger server`
// (cmd/dledger) does, documented (server_gcpace.go, server_memory.go).
var processWideGC = []string{"SetGCPercent", "SetMemoryLimit", "FreeOSMemory"}

// gcSettingCalls lists the calls of processWideGC in the Go source (not tests) under root,
// skipping the directories skip says, and counts the files it read.
func gcSettingCalls(t *testing.T, root string, skip func(string) bool) (found []string, files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && skip(path):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && slices.Contains(processWideGC, sel.Sel.Name) {
				found = append(found, path+": "+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// TestOnlyTheServerProcessSetsTheCollector: no package but cmd/ calls the runtime's
// process-wide memory settings; the check finds the calls cmd/dledger makes (so it can fail).
func TestOnlyTheServerProcessSetsTheCollector(t *testing.T) {
	root := filepath.Join("..", "..")
	got, files := gcSettingCalls(t, root, func(p string) bool {
		return p != root && (p == filepath.Join(root, "cmd") || strings.HasPrefix(filepath.Base(p), "."))
	})
	if len(got) > 0 {
		t.Errorf("a library package sets the process's collector:\n  %s", strings.Join(got, "\n  "))
	}
	if files < 100 {
		t.Errorf("read %d files of the module's packages: the walk missed them", files)
	}
	got, _ = gcSettingCalls(t, ".", func(string) bool { return false })
	for _, want := range []string{"SetGCPercent", "FreeOSMemory"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, ": "+want) }) {
			t.Errorf("cmd/dledger's call of %s not found (found %v): the check cannot fail", want, got)
		}
	}
}

// TestIdleHeapPollFor: a host's heap (a goal of 32 MiB and more) and any heap the pacer paces
// are polled every second (a burst at a small goal is seen within a second), a member
// process's few MiB every 5 s, as before the pacer (its idle cost is its wake-ups).
func TestIdleHeapPollFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		goal  uint64
		paced bool
		want  time.Duration
	}{{4 * mib, false, 5 * time.Second}, {31 * mib, false, 5 * time.Second}, {29 * mib, true, time.Second},
		{32 * mib, false, time.Second}, {300 * mib, false, time.Second}} {
		if got := idleHeapPollFor(c.goal, c.paced); got != c.want {
			t.Errorf("goal %d MiB, paced %v: poll every %v, want %v", c.goal/mib, c.paced, got, c.want)
		}
	}
}

// TestGCPacerBurstRaisesAtOnceAndHoldsAWindow: told of a mass election (burst), a paced host
// is at GOGC=gcPaceBurstPercent before it allocates, until gcPaceBurstHold after the last
// burst told (its timer, holdOver, or a poll), then at GOGC=100, and its quiet polls do not lower it below 100
// within a window; a burst at the burst percent sets nothing (but holds it longer), and
// nothing once stopped. Fails if burst waits for a poll, if it raises only to 100 (a crash of
// 10,000 groups then collects in its first 300 ms), if the burst percent outlasts its hold, or
// if the polls right after it lower the goal back to the settled one.
func TestGCPacerBurstRaisesAtOnceAndHoldsAWindow(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	t0 := time.Unix(1000, 0)
	var allocs uint64 = 1000 * mib
	at := func(s float64) gcSample {
		allocs += 1 * kib
		return gcSample{at: t0.Add(time.Duration(s * float64(time.Second))), live: 80 * mib, allocs: allocs, cycles: 50}
	}
	var set []int
	p := newGCPacer(at(0), func(pct int) { set = append(set, pct) })
	for s := 1.0; s <= 10; s++ {
		p.polled(at(s))
	}
	if !slices.Equal(set, []int{10}) {
		t.Fatalf("settled: percents set %v, want [10]", set)
	}
	p.burst(t0.Add(10500 * time.Millisecond))
	if want := []int{10, gcPaceBurstPercent}; !slices.Equal(set, want) || p.paced() {
		t.Fatalf("after burst: percents set %v, want %v at once", set, want)
	}
	p.burst(t0.Add(10600 * time.Millisecond))    // already at the burst percent: nothing set, held to 11.6 s
	p.holdOver(t0.Add(11500 * time.Millisecond)) // the first burst's timer: the last one's hold goes on
	if p.polled(at(11.5)) || len(set) != 2 {
		t.Fatalf("a poll or timer within the hold of the last burst changed the percent: set %v", set)
	}
	p.holdOver(t0.Add(11600 * time.Millisecond)) // the last burst's timer: GOGC=100
	for s := 12.0; s <= 20; s++ {                // quiet, within a window of the burst
		if p.polled(at(s)) {
			t.Fatalf("poll at %v s lowered the goal below 100 within a window of the burst", s)
		}
	}
	if want := []int{10, gcPaceBurstPercent, 100}; !slices.Equal(set, want) {
		t.Fatalf("after the hold: percents set %v, want %v", set, want)
	}
	if !p.polled(at(21)) { // a whole window after the burst: lowered again
		t.Fatalf("poll at 21 s did not lower the goal a window after the burst (set %v)", set)
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.burst(t0.Add(22 * time.Second))
	if want := []int{10, gcPaceBurstPercent, 100, 10}; !slices.Equal(set, want) {
		t.Errorf("percents set %v, want %v", set, want)
	}
}

// TestGCBurstEndsItsHoldByItself: gcBurst raises the process's pacer to the burst percent at
// once and puts it back to 100 by itself, without a poll, once the hold is over. Fails if the
// burst percent waits for a poll to end (the host allocates on after the election: a survivor
// of a 10,000-group crash grew its heap by 95 MB before the poll) or if gcBurst does not raise.
func TestGCBurstEndsItsHoldByItself(t *testing.T) {
	set := make(chan int, 4)
	p := newGCPacer(gcSample{at: time.Now()}, func(pct int) { set <- pct })
	if !processPacer.CompareAndSwap(nil, p) {
		t.Fatal("a process pacer is running in this test process")
	}
	defer processPacer.CompareAndSwap(p, nil)
	gcBurst()
	if got := <-set; got != gcPaceBurstPercent {
		t.Fatalf("gcBurst set GOGC %d, want %d", got, gcPaceBurstPercent)
	}
	select {
	case got := <-set:
		if got != 100 {
			t.Fatalf("after the hold: GOGC %d, want 100", got)
		}
	case <-time.After(gcPaceBurstHold + 30*time.Second):
		t.Fatalf("the burst percent did not end %v after gcBurst, with no poll", gcPaceBurstHold+30*time.Second)
	}
}

// TestGCPacerBurstHoldsWhileTheHostCampaigns: past gcPaceBurstHold the burst percent holds as
// long as the host's members run or wait to run vote rounds (busy), looked at every
// gcPaceBurstStep, and ends once they do not, or at gcPaceBurstMax whatever busy says. Fails
// if the burst percent ends in the middle of a cold start's elections (a collection of the
// growing heap in them), or if a host whose rounds never end keeps it for good.
func TestGCPacerBurstHoldsWhileTheHostCampaigns(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var set []int
	busy := true
	p := newGCPacer(gcSample{at: t0}, func(pct int) { set = append(set, pct) })
	p.busy = func() bool { return busy }
	p.burst(t0)
	if again := p.holdOver(ms(400)); again != 600*time.Millisecond {
		t.Fatalf("within the least hold: look again in %v, want 600ms", again)
	}
	for _, at := range []int{1000, 1250, 4750} {
		if again := p.holdOver(ms(at)); again != gcPaceBurstStep {
			t.Fatalf("busy at %d ms: look again in %v, want %v", at, again, gcPaceBurstStep)
		}
	}
	if again := p.holdOver(ms(5000)); again != 0 || !slices.Equal(set, []int{gcPaceBurstPercent, 100}) {
		t.Fatalf("busy at gcPaceBurstMax: again %v, percents set %v, want [%d 100]", again, set, gcPaceBurstPercent)
	}
	p.burst(ms(6000)) // another burst; the host's rounds end 1.5 s into it
	if again := p.holdOver(ms(7250)); again != gcPaceBurstStep {
		t.Fatalf("busy 1.25 s into the second burst: look again in %v", again)
	}
	busy = false
	if again := p.holdOver(ms(7500)); again != 0 || !slices.Equal(set, []int{gcPaceBurstPercent, 100, gcPaceBurstPercent, 100}) {
		t.Fatalf("not busy: again %v, percents set %v", again, set)
	}
	if again := p.holdOver(ms(7750)); again != 0 || len(set) != 4 {
		t.Fatalf("a look after the end: again %v, percents set %v", again, set)
	}
}

// TestGCBurstAtStartIsHeldByThePacer: a server process is at GOGC=gcPaceBurstPercent from
// before it makes its members (gcBurstAtStart), the pacer started later holds it while the
// host campaigns, past the least hold, and puts GOGC=100 by itself once the host is done.
// Fails if the start is not a burst (a cold start then collects its growing heap a dozen times
// as its members elect), if the pacer drops it while the host still campaigns, or keeps it
// once it does not.
func TestGCBurstAtStartIsHeldByThePacer(t *testing.T) {
	if !gcPaceWanted(os.Getenv) {
		t.Skip("GOGC or GOMEMLIMIT set for this test process")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc := func() uint64 {
		m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	started := gcBurstAtStart()
	if started.IsZero() || gogc() != gcPaceBurstPercent {
		t.Fatalf("at start: GOGC %d (started %v), want %d", gogc(), started, gcPaceBurstPercent)
	}
	var busy atomic.Bool
	var asked atomic.Int32
	busy.Store(true)
	// Its least hold is over: busy holds it. Looked at twice (the timer's first look, at once,
	// and one a step later) before GOGC is read: a pacer that dropped it at a look would show.
	_, _, stop := startGCPacer(started.Add(-gcPaceBurstHold), func() bool { asked.Add(1); return busy.Load() })
	defer stop()
	for deadline := time.Now().Add(30 * time.Second); asked.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pacer looked at the host %d times in 30 s, want 2", asked.Load())
		}
	}
	if got := gogc(); got != gcPaceBurstPercent {
		t.Fatalf("the host campaigns: GOGC %d, want %d", got, gcPaceBurstPercent)
	}
	busy.Store(false)
	for deadline := time.Now().Add(30 * time.Second); gogc() != 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the host is done: GOGC still %d after 30 s, want 100", gogc())
		}
	}
}

// TestGCPacerSettlesAWindowAfterABurst: settling from a burst until the pacer has had a whole
// window of polls after it (the poll that may lower the percent), not before any burst, not
// once stopped. Fails if it ends before that poll (an excess released then, at GOGC=100's goal,
// leaves the lowering's release nothing to return).
func TestGCPacerSettlesAWindowAfterABurst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) gcSample {
		return gcSample{at: t0.Add(time.Duration(s * float64(time.Second))), live: 80 << 20, allocs: 1 << 30, cycles: 50}
	}
	p := newGCPacer(at(0), func(int) {})
	if p.settling() {
		t.Fatal("settling before any burst")
	}
	p.burst(t0.Add(500 * time.Millisecond))
	for s := 1.0; s <= gcPaceWindow+1; s++ {
		if !p.settling() {
			t.Fatalf("not settling before the poll at %v s, within a window of polls of the burst", s)
		}
		p.polled(at(s))
	}
	if p.settling() {
		t.Fatalf("settling after a whole window of polls (percent %d)", p.percent)
	}
	p.burst(t0.Add(20 * time.Second))
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if p.settling() {
		t.Fatal("settling once stopped")
	}
}

// TestGCPacerRepeatedBurstsKeepTheirCap: bursts announced during a hold (a peer host crashing
// again and again while the members campaign) extend its least end but not its cap, counted
// from the burst that began it, and ask for one timer between them. Fails if each burst moved
// the cap (the process then stays at the burst percent for as long as a peer flaps) or started
// a timer of its own (timers piling up, each polling busy every gcPaceBurstStep).
func TestGCPacerRepeatedBurstsKeepTheirCap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var set []int
	p := newGCPacer(gcSample{at: t0}, func(pct int) { set = append(set, pct) })
	p.busy = func() bool { return true }
	timers := 0
	for at := 0; at < 9000; at += 500 {
		if p.burst(ms(at)) {
			timers++
		}
		if at < int(gcPaceBurstMax/time.Millisecond) {
			if again := p.holdOver(ms(at + 1)); again == 0 {
				t.Fatalf("the hold ended %d ms in, before its cap", at+1)
			}
		}
	}
	if timers != 1 {
		t.Fatalf("%d timers asked for by one hold's bursts, want 1", timers)
	}
	if again := p.holdOver(t0.Add(gcPaceBurstMax)); again != 0 || !slices.Equal(set, []int{gcPaceBurstPercent, 100}) {
		t.Fatalf("at the first burst's cap: again %v, percents set %v, want [%d 100]", again, set, gcPaceBurstPercent)
	}
	if !p.burst(ms(9500)) || !slices.Equal(set, []int{gcPaceBurstPercent, 100, gcPaceBurstPercent}) {
		t.Fatalf("a burst after the hold ended: a new hold with its timer; percents set %v", set)
	}
}
