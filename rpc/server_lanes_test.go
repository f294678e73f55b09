package rpc

// Workers started on demand (server_lanes.go): one per lane at rest, more as requests wait,
// never more than Workers, back to one once idle, and no request left behind by a worker that
// leaves.

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Issue 29: a host's server kept Workers (256) goroutines from Start to Stop. Now it starts
// with one, runs as many handlers at once as requests wait (up to Workers), and goes back to
// one once the burst is over.
func TestWorkersStartOnDemandAndLeaveWhenIdle(t *testing.T) {
	const workers, calls = 6, 10
	h := &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestVote}
	s := startServer(t, h, func(o *ServerOptions) { o.Workers = workers })
	if n := s.tasks.workers(); n != 1 {
		t.Fatalf("%d workers after Start, want 1", n)
	}
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, func(o *ClientOptions) { o.CallTimeout = waitTimeout })
	s.tasks.linger = 0 // read only by workers beyond the first, which start after this
	votes := make([]<-chan error, calls)
	for i := range votes {
		votes[i] = voteAsync(cl, int64(i+1))
	}
	eventually(t, "Workers handlers at once", func() bool { return h.active.Load() == workers })
	if n := s.tasks.workers(); n > workers+1 {
		t.Fatalf("%d workers, bound %d", n, workers)
	}
	close(h.gate)
	for i, v := range votes {
		if err := <-v; err != nil {
			t.Fatalf("vote %d: %v", i, err)
		}
	}
	if m := h.maxActive.Load(); m > workers+1 {
		t.Fatalf("%d handlers at once, bound %d", m, workers)
	}
	eventually(t, "the workers beyond the first gone", func() bool { return s.tasks.workers() == 1 })
}

// A lane whose workers come and go as fast as they can (no linger) serves every task pushed:
// none is left in the queue by a worker that leaves as it arrives.
func TestLaneLosesNoTask(t *testing.T) {
	var wg sync.WaitGroup
	var served atomic.Int64
	l := newLane(64, 4, &wg, func(*task) {
		if served.Add(1)%7 == 0 {
			time.Sleep(time.Microsecond)
		}
	})
	l.linger = 0
	l.start()
	const n = 50_000
	var pushed int64
	tasks := make([]task, 64)
	for i := 0; pushed < n; i++ {
		if l.push(&tasks[i%len(tasks)]) {
			pushed++
		} else {
			time.Sleep(10 * time.Microsecond)
		}
		if i%100 == 0 {
			time.Sleep(time.Microsecond) // let the queue run dry, so workers leave
		}
	}
	eventually(t, "every task served", func() bool { return served.Load() == n })
	if m := l.workers(); m > l.max+1 || m < 1 {
		t.Fatalf("%d workers live, bound %d", m, l.max)
	}
	l.close()
	waitGroup(t, &wg, "the lane's workers")
}

// Issue 29: the queue holds what a burst queues and lets it go once drained; the bound is
// no buffer allocated up front (a host's was a 1 MiB channel, resident once its ring had been
// moved along).
func TestLaneQueueShrinksAfterABurst(t *testing.T) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	var served atomic.Int64
	l := newLane(1<<17, 2, &wg, func(*task) {
		<-gate
		served.Add(1)
	})
	l.start()
	const n = 10_000
	tasks := make([]task, n)
	for i := range tasks {
		if !l.push(&tasks[i]) {
			t.Fatalf("push %d refused", i)
		}
	}
	l.mu.Lock()
	grown := cap(l.q)
	l.mu.Unlock()
	if grown < n-2 {
		t.Fatalf("queue of cap %d for %d tasks", grown, n)
	}
	close(gate)
	eventually(t, "every task served", func() bool { return served.Load() == n })
	eventually(t, "the burst's buffer dropped", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return cap(l.q) <= laneKeep
	})
	full := newLane(2, 1, &wg, nil)
	full.live = full.max // no worker to start: the queue alone
	if !full.push(&tasks[0]) || !full.push(&tasks[1]) || full.push(&tasks[2]) {
		t.Fatal("a lane of limit 2 must take two tasks and refuse the third")
	}
	l.close()
	waitGroup(t, &wg, "the lane's workers")
}

// TestLaneQueueStaysBoundedUnderSustainedLoad: a queue that never empties (one task served,
// one pushed, over and over, the queue full) keeps its buffer within about twice its bound.
// Fails if the served front is only let go when the queue drains: the buffer then grows by
// a slot per task served, without bound (201,024 slots after 200,000 tasks with a bound of
// 1,024).
func TestLaneQueueStaysBoundedUnderSustainedLoad(t *testing.T) {
	var wg sync.WaitGroup
	const limit = 1024
	l := newLane(limit, 1, &wg, nil)
	l.live = l.max // no worker to start: the test serves the queue itself
	tasks := make([]task, limit+1)
	for i := range limit {
		if !l.push(&tasks[i]) {
			t.Fatalf("push %d refused", i)
		}
	}
	for i := range 200_000 {
		l.mu.Lock()
		got := l.pop()
		l.mu.Unlock()
		if got == nil {
			t.Fatalf("round %d: the queue was empty", i)
		}
		if !l.push(got) {
			t.Fatalf("round %d: push refused with a slot free", i)
		}
	}
	l.mu.Lock()
	waiting, c := len(l.q)-l.head, cap(l.q)
	l.mu.Unlock()
	if waiting != limit || c > 2*limit+limit/2 {
		t.Fatalf("%d waiting in a buffer of %d slots; want %d in at most about %d", waiting, c, limit, 2*limit)
	}
}
