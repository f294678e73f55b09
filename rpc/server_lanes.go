package rpc

// The workers are started on demand (issue 29). A host of 10,000 groups runs up to 256
// ordinary workers and 32 heartbeat workers, because a mass election's vote handlers each wait
// for a shared fsync; started at Start and kept for good they were ~290 goroutines that wait
// for nothing once the elections are over, their stacks grown by the burst (~1.7 MiB of a
// host's RSS). A lane starts a goroutine when a task arrives and none is waiting for one, up
// to its bound; a goroutine beyond the lane's first finds the queue empty for laneLinger and
// leaves. The first never leaves: it takes any task the others left behind.
//
// The queue is a slice that grows with the backlog and is dropped once drained, not a channel
// of the bound's size: a host's bound is 128 Ki tasks, and a channel's ring buffer of 1 MiB,
// which every send moves along, ends up resident whole however short the queue stays.

import (
	"sync"
	"time"
)

// laneLinger is how long a worker beyond a lane's first waits for a task before it leaves:
// longer than the gaps between a mass election's waves (a vote handler's fsync, a round's
// re-vote delay), so a burst keeps its workers, and short enough that an idle host holds
// none of them a second after the burst.
const laneLinger = time.Second

// laneKeep is the largest queue buffer (in tasks) a lane keeps once drained.
const laneKeep = 256

// lane is one task queue and the goroutines serving it. mu guards everything but the
// constants; sig carries one token per waiting worker that push or close wakes.
type lane struct {
	limit int   // tasks queued at most
	max   int32 // goroutines at most
	// linger is laneLinger; tests shorten it before the lane starts.
	linger time.Duration
	wg     *sync.WaitGroup
	serve  func(*task)
	sig    chan struct{}

	mu      sync.Mutex
	q       []*task // q[head:] waits
	head    int
	live    int32 // goroutines serving the lane
	waiting int32 // of live, waiting for a token on sig (not yet woken)
	closed  bool
}

func newLane(size, workers int, wg *sync.WaitGroup, serve func(*task)) *lane {
	n := int32(max(workers, 1))
	return &lane{limit: max(size, 1), max: n, linger: laneLinger, wg: wg, serve: serve,
		sig: make(chan struct{}, n+1)}
}

// push queues t and makes sure a worker will take it: it wakes a waiting one, or starts one
// if the bound allows (else a running one takes it when done). false: the queue is full (t
// is not queued). Never after close. A queue that never empties (a sustained overload) moves
// its waiting tasks to the front when its buffer is full, so the buffer stays within about
// twice the bound instead of growing by a slot per task served.
func (l *lane) push(t *task) bool {
	l.mu.Lock()
	if len(l.q)-l.head >= l.limit {
		l.mu.Unlock()
		return false
	}
	if len(l.q) == cap(l.q) && l.head > 0 { // full: reuse the served front before growing
		n := copy(l.q, l.q[l.head:])
		clear(l.q[n:])
		l.q, l.head = l.q[:n], 0
	}
	l.q = append(l.q, t)
	wake, start := false, false
	switch {
	case l.waiting > 0:
		l.waiting--
		wake = true
	case l.live < l.max:
		l.live++
		start = true
	}
	l.mu.Unlock()
	if wake {
		l.sig <- struct{}{} // never blocks: at most one token per waiter, fewer waiters than its room
	}
	if start {
		l.wg.Add(1)
		go l.run(false)
	}
	return true
}

// start starts the lane's first worker, which leaves only at close.
func (l *lane) start() {
	l.mu.Lock()
	l.live++
	l.mu.Unlock()
	l.wg.Add(1)
	go l.run(true)
}

// close ends the lane once nothing pushes any more: its workers leave once the queue is empty.
func (l *lane) close() {
	l.mu.Lock()
	l.closed = true
	n := l.waiting
	l.waiting = 0
	l.mu.Unlock()
	for ; n > 0; n-- {
		l.sig <- struct{}{}
	}
}

// pop takes the next task, with mu held; nil: the queue is empty (its buffer then dropped if
// a burst grew it).
func (l *lane) pop() *task {
	if l.head == len(l.q) {
		if cap(l.q) > laneKeep {
			l.q = nil
		} else {
			l.q = l.q[:0]
		}
		l.head = 0
		return nil
	}
	t := l.q[l.head]
	l.q[l.head] = nil
	l.head++
	return t
}

// run serves the queue until close, or, unless first, until it stayed empty for linger.
func (l *lane) run(first bool) {
	defer l.wg.Done()
	var linger *time.Timer
	l.mu.Lock()
	for {
		if t := l.pop(); t != nil {
			l.mu.Unlock()
			l.serve(t)
			l.mu.Lock()
			continue
		}
		if l.closed {
			break
		}
		l.waiting++
		l.mu.Unlock()
		woken := l.wait(first, &linger)
		l.mu.Lock()
		if !woken {
			if l.waiting > 0 { // no token is on its way to this worker: leave
				l.waiting--
				break
			}
			// Every waiter was handed a token meanwhile, this one included: take it.
			l.mu.Unlock()
			<-l.sig
			l.mu.Lock()
		}
	}
	l.live--
	l.mu.Unlock()
}

// wait waits for a token; false: the linger timer fired first (never for the first worker).
func (l *lane) wait(first bool, linger **time.Timer) bool {
	if first {
		<-l.sig
		return true
	}
	if *linger == nil {
		*linger = time.NewTimer(l.linger)
	} else {
		(*linger).Reset(l.linger)
	}
	select {
	case <-l.sig:
		(*linger).Stop()
		return true
	case <-(*linger).C:
		return false
	}
}

// workers is how many goroutines serve the lane now.
func (l *lane) workers() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live
}
