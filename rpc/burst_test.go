package rpc

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestABurstWithinTheInflightBoundIsNoFlood: a connection that carries many groups (a host
// link) gets bursts of thousands of small requests. Throttled at MaxInflightPerConn, its unread
// backlog may reach 1 KiB per request it may have in flight before it counts as a flood: with
// the old bound (four frames of the largest size, 256 KiB whatever MaxInflightPerConn), this
// burst of about 400 KiB behind 1,024 held requests closed the connection and failed every
// call on it.
func TestABurstWithinTheInflightBoundIsNoFlood(t *testing.T) {
	const inflight, burst = 1024, 7000
	h := &fakeHandler{gate: make(chan struct{})}
	var bad reasonCounter
	s := startServer(t, h, func(o *ServerOptions) {
		o.MaxInflightPerConn = inflight
		o.Workers = inflight
		o.Hooks.OnBadFrame = bad.add
	})
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, func(o *ClientOptions) {
		o.SendQueue = 2 * burst
		o.CallTimeout = 30 * time.Second
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for i := 0; i < burst; i++ {
		wg.Add(1)
		cl.SendHeartBeat(testSelf, hbRequest(int64(i)), func(_ *protocol.HeartBeatResponse, err error) {
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	// Every handler slot is taken before the gate opens: the rest of the burst waits unread.
	eventually(t, "the in-flight bound reached", func() bool { return h.active.Load() == inflight })
	close(h.gate)
	waitGroup(t, &wg, "every call of the burst")
	if len(failed) > 0 || bad.get(ReasonFlood) > 0 {
		t.Fatalf("%d of %d calls failed (%v), %d floods", len(failed), burst, errors.Join(failed[:min(len(failed), 1)]...), bad.get(ReasonFlood))
	}
}
