package sim

import "time"

// event is one thing that happens at a virtual time. Ticks are the bulk of all events, so they
// carry their member and incarnation instead of a closure; everything else is a closure.
type event struct {
	at   time.Duration // virtual time since the start of the run
	seq  uint64        // ties at equal times run in the order they were queued
	tick bool
	m    *member
	inc  int
	gen  uint64 // a tick's schedule generation: a rescheduled member's older ticks are void
	fn   func()
}

// queue is a binary min-heap ordered by (at, seq): a total order, so a run is reproducible.
// It is typed (not container/heap) to avoid boxing every event.
type queue struct{ h []event }

func (q *queue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *queue) len() int { return len(q.h) }

func (q *queue) push(ev event) {
	q.h = append(q.h, ev)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h[n] = event{} // drop references for the GC
	q.h = q.h[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
