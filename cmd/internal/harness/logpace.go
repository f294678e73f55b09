package harness

import (
	"os"
	"slices"
	"time"
)

// The benchmark's latencies are the hosts' own log timestamps, so when it reads the logs changes
// none of them; reading them while the hosts elect does take processors from the hosts it
// measures (the survivors of a 10,000-group crash log some 13,000 watched lines within 0.2 s, and
// a benchmark that read them every 10 ms held 2-49 % of the machine in a 20 ms bin of the window,
// BENCHMARKS.md "Fifth session, 2026-11-28"). So while it waits for leaders it only looks at the
// logs' sizes, and reads them once they have stopped growing for a while, or when the last read
// is old enough that a log that never stops growing is still read. The cold start's CPU, which
// the moment of the read would move, is read from a trail of samples at the last election's
// moment (cpuTrail).

// Default pacing of the log reads while the benchmark waits for leaders.
const (
	logQuietFor = 50 * time.Millisecond // the logs' sizes unchanged this long: read them
	logReadLag  = time.Second           // read at least this often, growing or not
)

// logPacer decides, from the logs' sizes at each look, when the benchmark reads them. It has no
// clock of its own: the caller passes the time of each look.
type logPacer struct {
	quietFor, maxLag time.Duration
	sizes            []int64   // at the last look
	grewAt           time.Time // the last look that saw the sizes change
	readAt           time.Time // the last read (zero: none yet)
}

// due says whether to read the logs now, given their sizes at now; a true answer counts as a
// read. The first look reads at once (what is there already may be all there will be).
func (p *logPacer) due(now time.Time, sizes []int64) bool {
	if !slices.Equal(sizes, p.sizes) {
		p.sizes = slices.Clone(sizes)
		p.grewAt = now
	}
	if p.readAt.IsZero() || (now.Sub(p.grewAt) >= p.quietFor && p.grewAt.After(p.readAt)) || now.Sub(p.readAt) >= p.maxLag {
		p.readAt = now
		return true
	}
	return false
}

// Sizes are the followed files' sizes now (-1 for one that does not exist yet).
func (f *LogFollower) Sizes() []int64 {
	out := make([]int64, len(f.paths))
	for j, p := range f.paths {
		out[j] = -1
		if fi, err := os.Stat(p); err == nil {
			out[j] = fi.Size()
		}
	}
	return out
}

// cpuTrail is a series of (time, CPU) samples taken in time order, to read the CPU at a moment
// that is known only later.
type cpuTrail struct {
	at0 []time.Time
	cpu []time.Duration
}

func (t *cpuTrail) add(at time.Time, cpu time.Duration) {
	t.at0 = append(t.at0, at)
	t.cpu = append(t.cpu, cpu)
}

// at is the CPU of the first sample at or after moment, or of the last sample if none is;
// false with no sample at all.
func (t *cpuTrail) at(moment time.Time) (time.Duration, bool) {
	if len(t.cpu) == 0 {
		return 0, false
	}
	for i, a := range t.at0 {
		if !a.Before(moment) {
			return t.cpu[i], true
		}
	}
	return t.cpu[len(t.cpu)-1], true
}
