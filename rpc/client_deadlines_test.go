package rpc

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// TestDueCallsAgreeWithAScan: over random calls with deadlines of mixed timeouts, answers in
// any order and sweeps at random times, the heap names the same earliest deadline and expires
// the same calls as a scan of every pending call. An answered call's entry that counted as
// pending, or an overdue call left behind, fails it.
func TestDueCallsAgreeWithAScan(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		p := &peer{pending: map[uint64]*call{}}
		now, next := t0, uint64(0)
		for step := 0; step < 5000; step++ {
			now = now.Add(time.Duration(rng.IntN(int(20 * time.Millisecond))))
			switch op := rng.IntN(10); {
			case op < 5: // a call, with one of three timeouts
				next++
				c := &call{deadline: now.Add([]time.Duration{time.Second, 3 * time.Second, 100 * time.Millisecond}[rng.IntN(3)])}
				p.addPending(next, c)
			case op < 8: // an answer to any pending call
				if len(p.pending) > 0 {
					ids := make([]uint64, 0, len(p.pending))
					for id := range p.pending {
						ids = append(ids, id)
					}
					sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
					delete(p.pending, ids[rng.IntN(len(ids))])
					if len(p.pending) == 0 {
						p.emptied()
					}
				}
			default: // a sweep
				var want []uint64
				for id, c := range p.pending {
					if !now.Before(c.deadline) {
						want = append(want, id)
					}
				}
				p.overdueLocked(now)
				if len(p.expired) != len(want) {
					t.Fatalf("seed %d step %d: %d calls expired, a scan finds %d overdue", seed, step, len(p.expired), len(want))
				}
				for _, id := range want {
					if p.pending[id] != nil {
						t.Fatalf("seed %d step %d: overdue call %d still pending", seed, step, id)
					}
				}
				p.expired = p.expired[:0]
				if len(p.pending) == 0 {
					p.emptied()
				}
			}
			var first time.Time
			for _, c := range p.pending {
				if first.IsZero() || c.deadline.Before(first) {
					first = c.deadline
				}
			}
			got, ok := p.earliestDeadline()
			if ok != !first.IsZero() || !got.Equal(first) {
				t.Fatalf("seed %d step %d: earliest deadline %v (%v), a scan gives %v", seed, step, got.Sub(t0), ok, first.Sub(t0))
			}
			if len(p.due) > 2*len(p.pending)+1025 {
				t.Fatalf("seed %d step %d: %d heap entries for %d pending calls", seed, step, len(p.due), len(p.pending))
			}
		}
	}
}
