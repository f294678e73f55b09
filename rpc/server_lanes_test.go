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
	if n := s.tasks.live.Load(); n != 1 {
		t.Fatalf("%d workers after Start, want 1", n)
	}
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, func(o *ClientOptions) { o.CallTimeout = waitTimeout })
	s.tasks.linger = 0 // read only by workers beyond the first, which start after this
	votes := make([]<-chan error, calls)
	for i := range votes {
		votes[i] = voteAsync(cl, int64(i+1))
	}
	eventually(t, "Workers handlers at once", func() bool { return h.active.Load() == workers })
	if n := s.tasks.live.Load(); n > workers+1 {
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
	eventually(t, "the workers beyond the first gone", func() bool { return s.tasks.live.Load() == 1 })
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
	if m := l.live.Load(); m > l.max+1 || m < 1 {
		t.Fatalf("%d workers live, bound %d", m, l.max)
	}
	l.close()
	waitGroup(t, &wg, "the lane's workers")
}
