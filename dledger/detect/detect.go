// Package detect is the adaptive failure detector of docs/protocol.md section 14: per link, it
// keeps a bounded sample of what it measured (heartbeat inter-arrival gaps on a follower's link
// to its leader, heartbeat round trips on a leader's link to each follower) and turns it into
// the windows the elector waits before suspecting the other end: the follower timeout, the
// leader's check-quorum window and the back-off after REJECT_ALREADY_HAS_LEADER.
//
// Like the elector it serves, the package owns no clock, goroutine or socket: every time is an
// argument, so the simulator replays it exactly. It does no per-interval work of its own: a
// sample costs a few additions when a message arrives, a window a pass over 32 samples when
// the elector asks.
//
// # The rule
//
// A window is the largest sample of the last Size (32) on the link, plus a margin: the
// larger of a fixed floor and K (4) standard deviations of the samples. It is clamped to
// [floor, ceiling], where floor = interval + the same margin (never closer to the expected
// heartbeat than the measured jitter and the margin floor allow) and ceiling is the profile's
// value (never slower than the fixed window it replaces). A follower timeout's margin floor
// (Bounds.Margin) is the scheduling noise the protocol tolerates at both ends of a link
// without calling it a stall, three passes at each (docs/protocol.md 14.2): 60 ms. Check-quorum
// differs in four ways: its samples are round trips, to which it adds the interval (the next
// round goes an interval after the last); its margin floor is Bounds.QuorumMargin, the larger
// of the stall threshold and ten passes (100 ms with lan and fast); it keeps two margins (QuorumMargins); and its ceiling is the
// rpc call timeout plus an interval: a late answer can arrive until the call timeout, and
// counting it is what keeps a leader in office on a slow link. Until Min (8) samples have
// been seen since the link was new or repaired (Restart), a window is never below the
// profile's fixed window: it grows at the first sample that asks for it (a new leader on a
// slow link must not step down before it has measured eight round trips), and shrinks only on
// eight samples' evidence. A repair keeps the samples: it may only hold a window up.
//
// Why the maximum and not a quantile of a fitted normal (phi accrual): gaps and round trips
// are heavy-tailed (a GC pause, a descheduled VM, a TCP retransmission), so a normal fitted to
// them underestimates the tail exactly where a needless election happens. The maximum of the
// last 32 is a direct, distribution-free estimate of a high quantile; the K sigma margin keeps
// it above samples not yet seen when the link is noisy, and the stall threshold keeps it above
// a stall no sample has shown yet. A bounded sample forgets: a window that grew on a slow
// spell shrinks again 32 samples after the spell (6.4 s with lan), and one that must grow does
// so at the first larger sample.
package detect

import (
	"math"
	"time"
)

// Size is how many samples a link keeps; Min how many it needs before it adapts at all.
const (
	Size = 32
	Min  = 8
	// K is the number of standard deviations of margin above the largest sample.
	K = 4
)

// Bounds are what a window is clamped to, from the profile (dledger.Config).
type Bounds struct {
	// Interval is the heartbeat interval: the gap a follower expects between heartbeats.
	Interval time.Duration
	// Margin is the smallest margin of a follower timeout above the largest sample, and above
	// the interval for its floor (dledger.Config.DetectionMargin).
	Margin time.Duration
	// QuorumMargin is the smallest of each of a check-quorum window's margins
	// (dledger.Config.QuorumMargin): a round trip's step no sample has shown yet must fit in
	// them (QuorumMargins).
	QuorumMargin time.Duration
	// Ceiling is the profile's fixed window (leak x interval): a follower timeout never exceeds
	// it.
	Ceiling time.Duration
	// QuorumCeiling bounds the check-quorum window: the rpc call timeout plus an interval, the
	// latest a SUCCESS answer to a round can still arrive and count (never below Ceiling).
	QuorumCeiling time.Duration
}

// Sample is a bounded sample of durations: the last Size added.
type Sample struct {
	buf   [Size]time.Duration
	n     int // samples held, at most Size
	next  int // where the next sample goes
	fresh int // samples added since the link was new or repaired (Restart), at most Min
}

// Add records d (negative values, which only a clock stepping back could give, count as 0).
func (s *Sample) Add(d time.Duration) {
	s.buf[s.next] = max(d, 0)
	s.next = (s.next + 1) % Size
	s.n = min(s.n+1, Size)
	s.fresh = min(s.fresh+1, Min)
}

// Len is the number of samples held.
func (s *Sample) Len() int { return s.n }

// Restart marks the link repaired (a failed call, a new connection): the samples are kept, but
// until Min more arrive a window over them is never below the profile's (b.Ceiling), as on a
// new link. Kept, not forgotten: forgetting would make a window that the samples held above
// the profile's (a slow link's check-quorum window) fall back to it, below what the link was
// just measured to need, exactly while a repair makes it slower still.
func (s *Sample) Restart() { s.fresh = 0 }

// Settled says whether Min samples arrived since the link was new or repaired: only then may
// a window over them be below the profile's.
func (s *Sample) Settled() bool { return s.fresh >= Min }

// Stats returns the largest sample and the standard deviation of the samples held (0, 0 when
// empty). Computed when asked, from at most Size samples: nothing is done per sample but the
// store.
func (s *Sample) Stats() (hi, sd time.Duration) {
	if s.n == 0 {
		return 0, 0
	}
	var sum float64
	for _, d := range s.buf[:s.n] {
		hi = max(hi, d)
		sum += float64(d)
	}
	mean := sum / float64(s.n)
	var sq float64
	for _, d := range s.buf[:s.n] {
		x := float64(d) - mean
		sq += x * x
	}
	return hi, time.Duration(math.Sqrt(sq / float64(s.n)))
}

// margin is the margin above the largest sample: the floor given or K sigma.
func (s *Sample) margin(floor time.Duration) time.Duration {
	_, sd := s.Stats()
	return max(floor, K*sd)
}

// window is the rule of the package comment: largest sample + base + margins x margin, the
// margin at least floor, clamped to [interval + margins x margin, ceiling]. Until Min samples arrived since the link
// was new or repaired (Settled) it is never below the profile's window (b.Ceiling): a window
// grows at the first sample that asks for it, but shrinks only on Min samples' evidence.
func (s *Sample) window(base time.Duration, margins int, floor time.Duration, b Bounds, ceiling time.Duration) time.Duration {
	if s.n == 0 {
		return b.Ceiling
	}
	hi, sd := s.Stats()
	m := time.Duration(margins) * max(floor, K*sd)
	w := min(max(hi+base+m, b.Interval+m), ceiling)
	if !s.Settled() {
		w = max(w, b.Ceiling)
	}
	return w
}

// Floor is the floor the samples justify for a follower timeout over them: the interval plus
// the margin (b.Margin, or K sigma if the samples are noisier). QuorumFloor is a check-quorum
// window's. Neither is ever above the ceiling: the ceiling wins.
func (s *Sample) Floor(b Bounds) time.Duration {
	return b.Interval + s.margin(b.Margin)
}

// QuorumFloor is the floor of a check-quorum window over these samples (round trips): the
// interval plus QuorumMargins margins of at least b.QuorumMargin.
func (s *Sample) QuorumFloor(b Bounds) time.Duration {
	return b.Interval + QuorumMargins*s.margin(b.QuorumMargin)
}

// Arrivals is a follower's link to one member as its leader: the gaps between the heartbeats
// that arrived from it.
type Arrivals struct {
	last time.Time
	gaps Sample
}

// Heard records a heartbeat that arrived at now. A gap longer than b.Ceiling is no sample: the
// follower has timed out by then (or its own process stalled), so it measures an outage, not
// the link. A gap shorter than the interval counts as one interval: heartbeats read in a burst
// (after this process was stopped, or a round the leader sent at once) say nothing about how
// late the next one can be, and counted as they are they would inflate the deviation, and so
// the margin, of a member that just resumed (measured: 450 ms windows instead of 300). A
// heartbeat that arrives before the last one (a clock stepping back) restarts the count.
func (a *Arrivals) Heard(now time.Time, b Bounds) {
	if !a.last.IsZero() && !now.Before(a.last) {
		if gap := now.Sub(a.last); gap <= b.Ceiling {
			a.gaps.Add(max(gap, b.Interval))
		}
	}
	a.last = now
}

// Forget ends a run of heartbeats (a new leadership, or a stall of this member's own process):
// the next heartbeat starts a new gap, and is not measured against the last one.
func (a *Arrivals) Forget() { a.last = time.Time{} }

// Restart is a repaired link (Sample.Restart): the run of heartbeats ends (Forget), and the
// timeout is the profile's until Min gaps arrived over the new connection.
func (a *Arrivals) Restart() {
	a.Forget()
	a.gaps.Restart()
}

// Gaps is the sample of gaps, for status and the simulator's bound check.
func (a *Arrivals) Gaps() *Sample { return &a.gaps }

// Timeout is the follower timeout on this link: how long the follower waits after the last
// heartbeat before it suspects the leader. Between Floor and b.Ceiling.
func (a *Arrivals) Timeout(b Bounds) time.Duration {
	return a.gaps.window(0, 1, b.Margin, b, b.Ceiling)
}

// RoundTrips is a leader's link to one follower: the round trips of its heartbeats (send to
// answer, as the leader's own clock measures them, so no clock is compared across members).
type RoundTrips struct{ rtt Sample }

// Answered records an answer that arrived at now to a heartbeat sent at sent.
func (r *RoundTrips) Answered(sent, now time.Time) { r.rtt.Add(now.Sub(sent)) }

// Sample is the sample of round trips.
func (r *RoundTrips) Sample() *Sample { return &r.rtt }

// Restart is a repaired link (Sample.Restart): the check-quorum window is at least the
// profile's until Min round trips arrived, and never below what the kept samples ask for.
func (r *RoundTrips) Restart() { r.rtt.Restart() }

// QuorumMargins is how many margins a check-quorum window keeps above what it measured: a
// step in the round trip (a noisy neighbour) adds the whole step to the age of the newest
// acknowledgement, but only half of it, one way, to a follower's gap; the second margin is for
// that step, which no sample has shown yet.
const QuorumMargins = 2

// QuorumWindow is the check-quorum window the link needs: the leader steps down when no
// quorum acknowledged a round sent within it. An acknowledgement of a round sent at t arrives
// a round trip after t, and the next round goes an interval later, so the newest
// acknowledgement the leader holds is at most interval + round trip old: the window is the
// largest round trip + the interval + two margins, clamped to [interval + two margins,
// max(b.Ceiling, b.QuorumCeiling)]. On a fast link that is below the profile's window (a
// leader cut off from its followers steps down sooner); on a slow one above it, up to the
// call timeout.
func (r *RoundTrips) QuorumWindow(b Bounds) time.Duration {
	return r.rtt.window(b.Interval, QuorumMargins, b.QuorumMargin, b, max(b.Ceiling, b.QuorumCeiling))
}

// QuorumWindow is the leader's check-quorum window over its followers' links: the quorum-th
// smallest of their windows, counting the leader itself as one (its own acknowledgement is
// always now). A quorum of the fastest links is what keeps the leader in office, so the
// window follows them; a slow minority neither holds it up nor is needed. windows is
// scratch space, reordered.
func QuorumWindow(windows []time.Duration, quorum int) time.Duration {
	if len(windows) == 0 || quorum <= 1 {
		return 0
	}
	sortDurations(windows)
	return windows[min(quorum-1, len(windows))-1]
}

// sortDurations is an insertion sort: at most a group's members, and no allocation.
func sortDurations(ds []time.Duration) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j] < ds[j-1]; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}
