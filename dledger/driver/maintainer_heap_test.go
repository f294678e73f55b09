package driver

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPassHeapAgreesWithASortedList: the Maintainer's heap of passes (keys held in its entries,
// not in the electors' records) under random pushes, fixes up and down, removals and pops keeps
// every elector's index at its entry, the heap's order, and pops the electors in the order of
// their keys, as a sorted list of the same operations says.
func TestPassHeapAgreesWithASortedList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 29))
	var h passHeap
	ref := map[*driven]int64{} // the electors in the heap and their keys
	ds := make([]*driven, 300)
	for i := range ds {
		ds[i] = &driven{index: -1}
	}
	check := func(step int) {
		t.Helper()
		if len(h) != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", step, len(h), len(ref))
		}
		for i, en := range h {
			if en.d.index != i {
				t.Fatalf("step %d: entry %d's elector has index %d", step, i, en.d.index)
			}
			if ref[en.d] != en.key {
				t.Fatalf("step %d: entry %d filed under %d, want %d", step, i, en.key, ref[en.d])
			}
			if i > 0 && h[(i-1)/2].key > en.key {
				t.Fatalf("step %d: heap out of order at %d", step, i)
			}
		}
	}
	for step := range 20000 {
		d := ds[r.IntN(len(ds))]
		key := r.Int64N(1000)
		switch op := r.IntN(4); {
		case d.index < 0 && op < 3:
			h.push(d, key)
			ref[d] = key
		case d.index < 0:
			if len(h) == 0 {
				continue
			}
			min := h[0].key
			got := h.pop()
			if ref[got] != min || got.index != -1 {
				t.Fatalf("step %d: popped key %d (index %d), want the least, %d", step, ref[got], got.index, min)
			}
			for _, k := range ref {
				if k < min {
					t.Fatalf("step %d: popped %d with %d still in the heap", step, min, k)
				}
			}
			delete(ref, got)
		case op < 2:
			h.fix(d.index, key)
			ref[d] = key
		default:
			h.remove(d.index)
			if d.index != -1 {
				t.Fatalf("step %d: a removed elector has index %d", step, d.index)
			}
			delete(ref, d)
		}
		check(step)
	}
	var want []int64
	for _, k := range ref {
		want = append(want, k)
	}
	slices.Sort(want)
	for i, k := range want {
		if h[0].key != k {
			t.Fatalf("pop %d: key %d, want %d", i, h[0].key, k)
		}
		h.pop()
	}
}
