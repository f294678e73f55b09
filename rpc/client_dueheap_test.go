package rpc

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// stdDue is dueCalls through container/heap, the order the typed heap must keep.
type stdDue []dueCall

func (h stdDue) Len() int           { return len(h) }
func (h stdDue) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h stdDue) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stdDue) Push(x any)        { *h = append(*h, x.(dueCall)) }
func (h *stdDue) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestDueHeapIsContainerHeap: the typed heap pushes, pops and rebuilds as container/heap does,
// entry for entry (ties included: many calls share a deadline), on random sequences.
func TestDueHeapIsContainerHeap(t *testing.T) {
	base := time.Unix(1000, 0)
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		var got dueCalls
		var want stdDue
		for step := 0; step < 400; step++ {
			switch k := r.IntN(10); {
			case k < 6:
				d := dueCall{deadline: base.Add(time.Duration(r.IntN(20)) * time.Millisecond), id: uint64(step)}
				got.push(d)
				heap.Push(&want, d)
			case k < 9 && len(want) > 0:
				g, w := got.pop(), heap.Pop(&want).(dueCall)
				if g != w {
					t.Fatalf("seed %d step %d: pop %+v, container/heap %+v", seed, step, g, w)
				}
			case k == 9:
				r.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i]; want[i], want[j] = want[j], want[i] })
				got.initHeap()
				heap.Init(&want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("seed %d step %d: entry %d is %+v, container/heap's %+v", seed, step, i, got[i], want[i])
				}
			}
		}
	}
}

// TestDueHeapAllocatesNothing: a push and a pop on a heap with room allocate nothing (through
// heap.Interface each boxed its entry).
func TestDueHeapAllocatesNothing(t *testing.T) {
	h := make(dueCalls, 0, 64)
	now := time.Now()
	for i := range 32 {
		h.push(dueCall{deadline: now.Add(time.Duration(i%7) * time.Millisecond), id: uint64(i)})
	}
	if a := testing.AllocsPerRun(100, func() {
		h.push(dueCall{deadline: now, id: 1})
		_ = h.pop()
	}); a != 0 {
		t.Errorf("a push and a pop made %v allocations", a)
	}
}
