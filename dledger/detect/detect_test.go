package detect

import (
	"math/rand/v2"
	"testing"
	"time"
)

var lan = Bounds{Interval: 200 * time.Millisecond, Margin: 60 * time.Millisecond,
	QuorumMargin: 100 * time.Millisecond, Ceiling: 600 * time.Millisecond, QuorumCeiling: 1200 * time.Millisecond}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// heartbeats feeds a gaps as arrivals, starting at t0, and returns the time of the last.
func heartbeats(a *Arrivals, at time.Time, gaps ...time.Duration) time.Time {
	a.Heard(at, lan)
	for _, g := range gaps {
		at = at.Add(g)
		a.Heard(at, lan)
	}
	return at
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestTimeoutIsTheCeilingUntilMinSamples(t *testing.T) {
	var a Arrivals
	heartbeats(&a, t0, repeat(200*time.Millisecond, Min-1)...)
	if got := a.Timeout(lan); got != lan.Ceiling {
		t.Fatalf("%d samples: timeout %v, want the ceiling %v", Min-1, got, lan.Ceiling)
	}
	heartbeats(&a, t0.Add(time.Hour), 200*time.Millisecond)
	// The hour-long gap between the two runs is above the ceiling: no sample. So Min now.
	if got := a.Gaps().Len(); got != Min {
		t.Fatalf("samples %d, want %d (a gap above the ceiling is no sample)", got, Min)
	}
	if got := a.Timeout(lan); got != 260*time.Millisecond {
		t.Fatalf("steady 200 ms gaps: timeout %v, want interval + margin = 260ms", got)
	}
}

func TestTimeoutGrowsAtOnceAndShrinksAfterSizeSamples(t *testing.T) {
	var a Arrivals
	at := heartbeats(&a, t0, repeat(200*time.Millisecond, Size)...)
	steady := a.Timeout(lan)
	at = heartbeats(&a, at, 260*time.Millisecond)
	grown := a.Timeout(lan)
	if grown <= steady || grown < 260*time.Millisecond+lan.Margin {
		t.Fatalf("after one 260 ms gap: %v (was %v), want at least 320ms", grown, steady)
	}
	heartbeats(&a, at, repeat(200*time.Millisecond, Size)...)
	if got := a.Timeout(lan); got != steady {
		t.Fatalf("after %d steady gaps: %v, want %v again", Size, got, steady)
	}
}

func TestQuorumWindowFollowsRoundTripsUpToTheCallTimeout(t *testing.T) {
	var r RoundTrips
	for range Size {
		r.Answered(t0, t0.Add(100*time.Microsecond))
	}
	if got, want := r.QuorumWindow(lan), lan.Interval+100*time.Microsecond+2*lan.QuorumMargin; got != want {
		t.Fatalf("loopback: %v, want %v", got, want)
	}
	var slow RoundTrips
	rnd := rand.New(rand.NewPCG(1, 2))
	for range Size {
		slow.Answered(t0, t0.Add(300*time.Millisecond+time.Duration(rnd.Int64N(int64(200*time.Millisecond)))))
	}
	hi, _ := slow.Sample().Stats()
	got := slow.QuorumWindow(lan)
	if got <= lan.Interval+hi || got <= lan.Ceiling || got > lan.QuorumCeiling {
		t.Fatalf("400 +- 100 ms round trips (largest %v): %v, want above interval + largest and the profile's %v, at most %v",
			hi, got, lan.Ceiling, lan.QuorumCeiling)
	}
}

// TestWindowsStayWithinBounds: whatever the samples, every window is within [floor, ceiling].
func TestWindowsStayWithinBounds(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		var a Arrivals
		var r RoundTrips
		at := t0
		a.Heard(at, lan)
		spread := time.Duration(1 + rnd.Int64N(int64(time.Second)))
		for range rnd.IntN(3 * Size) {
			at = at.Add(time.Duration(rnd.Int64N(int64(spread))))
			a.Heard(at, lan)
			r.Answered(at, at.Add(time.Duration(rnd.Int64N(int64(spread)))))
		}
		to := a.Timeout(lan)
		if to > lan.Ceiling || (a.Gaps().Len() >= Min && to < min(a.Gaps().Floor(lan), lan.Ceiling)) {
			t.Fatalf("trial %d: timeout %v outside [%v, %v]", trial, to, a.Gaps().Floor(lan), lan.Ceiling)
		}
		if hi, _ := a.Gaps().Stats(); a.Gaps().Len() >= Min && to < min(hi, lan.Ceiling) {
			t.Fatalf("trial %d: timeout %v below the largest gap %v", trial, to, hi)
		}
		qw := r.QuorumWindow(lan)
		if qw > lan.QuorumCeiling || (r.Sample().Len() >= Min && qw < min(r.Sample().QuorumFloor(lan), lan.QuorumCeiling)) {
			t.Fatalf("trial %d: quorum window %v outside bounds", trial, qw)
		}
	}
}

func TestQuorumWindowIsTheQuorumsFastestLinks(t *testing.T) {
	ws := []time.Duration{900, 300, 500, 400} // four followers of a 5-member group
	if got := QuorumWindow(ws, 3); got != 400 {
		t.Fatalf("quorum 3 of 5: %v, want the second smallest (400)", got)
	}
	if got := QuorumWindow([]time.Duration{700}, 1); got != 0 {
		t.Fatalf("a member that is a quorum by itself: %v, want 0 (no window)", got)
	}
}

func TestAFollowerForgetsTheLastHeartbeatOfARun(t *testing.T) {
	var a Arrivals
	at := heartbeats(&a, t0, repeat(200*time.Millisecond, Min)...)
	a.Forget()
	heartbeats(&a, at.Add(500*time.Millisecond))
	if hi, _ := a.Gaps().Stats(); hi != 200*time.Millisecond {
		t.Fatalf("largest gap %v: the 500 ms across a Forget was counted", hi)
	}
}

func BenchmarkHeardAndTimeout(b *testing.B) {
	var a Arrivals
	at := t0
	for i := 0; i < b.N; i++ {
		at = at.Add(200 * time.Millisecond)
		a.Heard(at, lan)
		_ = a.Timeout(lan)
	}
}

// TestAWindowGrowsOnOneSampleButShrinksOnlyOnMin: a new leader on a slow link holds on from
// its first slow answer; a new one on a fast link keeps the profile's window until Min.
func TestAWindowGrowsOnOneSampleButShrinksOnlyOnMin(t *testing.T) {
	var slow, fast RoundTrips
	slow.Answered(t0, t0.Add(500*time.Millisecond))
	if got := slow.QuorumWindow(lan); got <= lan.Ceiling {
		t.Fatalf("one 500 ms round trip: %v, want above the profile's %v", got, lan.Ceiling)
	}
	for i := range Min {
		if got := fast.QuorumWindow(lan); got != lan.Ceiling {
			t.Fatalf("%d fast round trips: %v, want the profile's %v", i, got, lan.Ceiling)
		}
		fast.Answered(t0, t0.Add(100*time.Microsecond))
	}
	if got := fast.QuorumWindow(lan); got >= lan.Ceiling {
		t.Fatalf("%d fast round trips: %v, want below the profile's %v", Min, got, lan.Ceiling)
	}
}

// TestABurstOfHeartbeatsDoesNotWidenTheWindow: heartbeats read at once after this member was
// stopped count as interval-long gaps, not as zero-length ones that would inflate the margin.
func TestABurstOfHeartbeatsDoesNotWidenTheWindow(t *testing.T) {
	var a Arrivals
	at := heartbeats(&a, t0, 0, time.Millisecond, 0, 0)
	heartbeats(&a, at, repeat(200*time.Millisecond, Min)...)
	if got, want := a.Timeout(lan), lan.Interval+lan.Margin; got != want {
		t.Fatalf("after a burst and %d steady gaps: %v, want %v", Min, got, want)
	}
}

// TestARepairHoldsWindowsUpAndNeverLowersThem (Restart): a repaired link's windows are at
// least the profile's until Min new samples arrive, and never below what the kept samples ask
// for: a slow link's check-quorum window, above the profile's, stays where it was.
func TestARepairHoldsWindowsUpAndNeverLowersThem(t *testing.T) {
	var fast, slow RoundTrips
	for range Size {
		fast.Answered(t0, t0.Add(100*time.Microsecond))
		slow.Answered(t0, t0.Add(450*time.Millisecond))
	}
	adapted, held := fast.QuorumWindow(lan), slow.QuorumWindow(lan)
	if adapted >= lan.Ceiling || held <= lan.Ceiling {
		t.Fatalf("windows %v (loopback) and %v (slow), want below and above the profile's %v", adapted, held, lan.Ceiling)
	}
	fast.Restart()
	slow.Restart()
	for i := range Min {
		if got := slow.QuorumWindow(lan); got != held {
			t.Fatalf("slow link, %d round trips after a repair: %v, want %v as before it", i, got, held)
		}
		if got := fast.QuorumWindow(lan); got != lan.Ceiling {
			t.Fatalf("loopback, %d round trips after a repair: %v, want the profile's %v", i, got, lan.Ceiling)
		}
		fast.Answered(t0, t0.Add(100*time.Microsecond))
		slow.Answered(t0, t0.Add(450*time.Millisecond))
	}
	if got := fast.QuorumWindow(lan); got != adapted || !fast.Sample().Settled() {
		t.Fatalf("loopback, %d round trips after a repair: %v, want %v again", Min, got, adapted)
	}

	var a Arrivals
	at := heartbeats(&a, t0, repeat(200*time.Millisecond, Size)...)
	a.Restart()
	if got := a.Timeout(lan); got != lan.Ceiling || a.Gaps().Settled() {
		t.Fatalf("follower timeout %v after a repair, want the profile's %v", got, lan.Ceiling)
	}
	at = heartbeats(&a, at.Add(500*time.Millisecond), repeat(200*time.Millisecond, Min-1)...)
	if hi, _ := a.Gaps().Stats(); hi != 200*time.Millisecond || a.Timeout(lan) != lan.Ceiling {
		t.Fatalf("largest gap %v, timeout %v: the gap across the repair counted, or %d gaps settled it", hi, a.Timeout(lan), Min-1)
	}
	heartbeats(&a, at, 200*time.Millisecond)
	if got, want := a.Timeout(lan), lan.Interval+lan.Margin; got != want {
		t.Fatalf("timeout %v after %d gaps since the repair, want %v", got, Min, want)
	}
}
