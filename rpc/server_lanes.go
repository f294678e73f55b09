package rpc

// The workers are started on demand (issue 29). A host of 10,000 groups runs up to 256
// ordinary workers and 32 heartbeat workers, because a mass election's vote handlers each wait
// for a shared fsync; started at Start and kept for good they were ~290 goroutines that wait
// for nothing once the elections are over, their stacks grown by the burst (~1.7 MiB of a
// host's RSS). A lane starts a goroutine when a task arrives and none is waiting for one, up
// to its bound; a goroutine beyond the lane's first finds the queue empty for laneLinger and
// leaves. The first never leaves: it takes any task the others left behind.

import (
	"sync"
	"sync/atomic"
	"time"
)

// laneLinger is how long a worker beyond a lane's first waits for a task before it leaves:
// longer than the gaps between a mass election's waves (a vote handler's fsync, a round's
// re-vote delay), so a burst keeps its workers, and short enough that an idle host holds
// none of them a second after the burst.
const laneLinger = time.Second

// lane is one task queue and the goroutines serving it.
type lane struct {
	q   chan *task
	max int32 // goroutines at most (one beyond it briefly, see wait)
	// linger is laneLinger; tests shorten it before the lane starts.
	linger time.Duration
	live   atomic.Int32
	// idle counts the workers waiting for a task, queued the tasks pushed and not yet taken.
	// A worker that takes a task lowers idle before queued, and push raises queued before
	// it sends: a task and the worker taking it are in both counts or in queued alone, never
	// in idle alone, so queued > idle always means a task no waiting worker will take.
	idle   atomic.Int32
	queued atomic.Int32
	wg     *sync.WaitGroup
	serve  func(*task)
}

func newLane(size, workers int, wg *sync.WaitGroup, serve func(*task)) *lane {
	return &lane{q: make(chan *task, size), max: int32(max(workers, 1)), linger: laneLinger, wg: wg, serve: serve}
}

// push queues t and makes sure a worker will take it; false: the queue is full (t is not
// queued). Only the event loops push, and never after close.
func (l *lane) push(t *task) bool {
	n := l.queued.Add(1)
	select {
	case l.q <- t:
	default:
		l.queued.Add(-1)
		return false
	}
	// More tasks waiting than workers waiting: one more worker, if the bound allows.
	if n > l.idle.Load() {
		l.grow()
	}
	return true
}

// took notes that a worker took a task from the queue; wasIdle: it was counted idle.
func (l *lane) took(wasIdle bool) {
	if wasIdle {
		l.idle.Add(-1)
	}
	l.queued.Add(-1)
}

// start starts the lane's first worker, which never leaves until close.
func (l *lane) start() {
	l.live.Add(1)
	l.wg.Add(1)
	go l.run(true)
}

// grow starts a worker unless max are running.
func (l *lane) grow() {
	for {
		n := l.live.Load()
		if n >= l.max {
			return
		}
		if l.live.CompareAndSwap(n, n+1) {
			break
		}
	}
	l.wg.Add(1)
	go l.run(false)
}

// close ends the lane once nothing pushes any more: its workers leave once the queue is empty.
func (l *lane) close() { close(l.q) }

// run serves the queue until it is closed, or, unless first, until it stayed empty for
// laneLinger.
func (l *lane) run(first bool) {
	defer l.wg.Done()
	var linger *time.Timer
	for {
		select {
		case t, ok := <-l.q:
			if !ok {
				return
			}
			l.took(false)
			l.serve(t)
			continue
		default:
		}
		t, ok := l.wait(first, &linger)
		switch {
		case t != nil:
			l.serve(t)
		case !ok:
			return
		}
	}
}

// wait waits for the next task; ok false: the worker leaves (the queue closed, or it lingered
// in vain). A worker leaving looks at the queue once more after it stopped counting as live,
// so a task pushed meanwhile either sees it gone (push starts another) or is taken here.
func (l *lane) wait(first bool, linger **time.Timer) (*task, bool) {
	l.idle.Add(1)
	if first {
		t, ok := <-l.q
		if !ok {
			l.idle.Add(-1)
			return nil, false
		}
		l.took(true)
		return t, true
	}
	if *linger == nil {
		*linger = time.NewTimer(l.linger)
	} else {
		(*linger).Reset(l.linger)
	}
	select {
	case t, ok := <-l.q:
		(*linger).Stop()
		if !ok {
			l.idle.Add(-1)
			return nil, false
		}
		l.took(true)
		return t, true
	case <-(*linger).C:
	}
	l.idle.Add(-1)
	l.live.Add(-1)
	select {
	case t, ok := <-l.q:
		if !ok {
			return nil, false
		}
		l.live.Add(1) // back: may pass max by one until it leaves again
		l.took(false)
		return t, true
	default:
		return nil, false
	}
}
