package rpc

import (
	"time"
)

// dueCalls is a peer's pending calls by deadline, earliest first: what the timeout sweep asks
// (the earliest deadline, the calls overdue) without a scan of every pending call. An answered
// call leaves the pending map only; its entry here is dropped when it reaches the front or
// when the heap is rebuilt. Guarded by the peer's mu.
//
// Scanning the map instead, once per sweep and the sweep once per deadline, was quadratic in
// the calls pending: a host link of a 10,000-group cold start held thousands, the scan ran
// under the lock every call to that peer host takes, and every group's sends queued behind it
// (255 of a host's 256 pass workers waiting on that lock in one goroutine dump; issue 29,
// BENCHMARKS.md "the link's deadlines").
type dueCalls []dueCall

type dueCall struct {
	deadline time.Time
	id       uint64
}

func (h dueCalls) less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }

// push, pop and initHeap are container/heap's Push, Pop and Init, step for step, on the
// concrete type: through heap.Interface every push and pop put its 32-byte entry in an
// interface, an allocation per call sent (7,000 of a survivor in a 10,000-group crash; issue
// 29, halloc).
func (h *dueCalls) push(d dueCall) {
	*h = append(*h, d)
	h.up(len(*h) - 1)
}

func (h *dueCalls) pop() dueCall {
	n := len(*h) - 1
	(*h)[0], (*h)[n] = (*h)[n], (*h)[0]
	h.down(0, n)
	d := (*h)[n]
	*h = (*h)[:n]
	return d
}

func (h dueCalls) initHeap() {
	n := len(h)
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i, n)
	}
}

func (h dueCalls) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h dueCalls) down(i0, n int) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // = 2*i + 2  // right child
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// addPending registers call c as id, pending until its deadline. The caller holds p.mu.
func (p *peer) addPending(id uint64, c *call) {
	p.pending[id] = c
	p.peak = max(p.peak, len(p.pending))
	if len(p.due) > 2*len(p.pending)+1024 {
		p.rebuildDue() // answered calls' entries, not yet at the front
	}
	p.due.push(dueCall{deadline: c.deadline, id: id})
}

// rebuildDue makes the heap of the pending calls only.
func (p *peer) rebuildDue() {
	p.due = p.due[:0]
	for id, c := range p.pending {
		p.due = append(p.due, dueCall{deadline: c.deadline, id: id})
	}
	p.due.initHeap()
}

// live says whether the heap entry d stands for a call still pending.
func (p *peer) live(d dueCall) bool {
	c := p.pending[d.id]
	return c != nil && c.deadline.Equal(d.deadline)
}

// earliestDeadline is the soonest deadline of the pending calls; ok is false if none is
// pending. The caller holds p.mu.
func (p *peer) earliestDeadline() (next time.Time, ok bool) {
	for len(p.due) > 0 {
		if d := p.due[0]; p.live(d) {
			return d.deadline, true
		}
		p.due.pop()
	}
	return time.Time{}, false
}

// overdueLocked moves the pending calls whose deadline has passed by now to p.expired. The
// caller holds p.mu.
func (p *peer) overdueLocked(now time.Time) {
	for len(p.due) > 0 && !now.Before(p.due[0].deadline) {
		d := p.due.pop()
		if p.live(d) {
			p.expired = append(p.expired, p.pending[d.id])
			delete(p.pending, d.id)
		}
	}
}

// clearDue empties the heap with the pending map, freeing it after a burst as emptied frees
// the map.
func (p *peer) clearDue() {
	if cap(p.due) > shrinkAbove {
		p.due = nil
	} else {
		p.due = p.due[:0]
	}
}
