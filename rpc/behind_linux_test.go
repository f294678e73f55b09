//go:build linux

package rpc

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestBehindReaderKeepsConnection (issue 29): a call that times out while its answer waits
// unread in the socket (the client's reader is behind: here held in another call's done, as
// a host starved of CPU or a reader held by one group's fsync was) does not make the
// connection silent. Before, the client dropped it, failing every call on it, and redialled;
// on a host link that is every group's calls to the peer host, and the liveness table turned
// that host stale. The connection is kept: once the reader catches up, calls go on over it.
func TestBehindReaderKeepsConnection(t *testing.T) {
	const callTimeout = time.Second // the answer must be in the socket by then: generous
	s := startServer(t, &fakeHandler{}, nil)
	var connects atomic.Int32
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.CallTimeout = callTimeout
		o.OnPeerConnected = func(string) { connects.Add(1) }
	})
	eventually(t, "the connection to be ready", func() bool { return connects.Load() == 1 }) // OnPeerConnected follows Connected
	hold, held := make(chan struct{}), make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()
	cl.SendHeartBeat("srv", hbRequest(1), func(*protocol.HeartBeatResponse, error) {
		close(held)
		<-hold // the reader stays here
	})
	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatal("the first call was never answered")
	}

	late := make(chan error, 1)
	cl.SendHeartBeat("srv", hbRequest(2), func(_ *protocol.HeartBeatResponse, err error) { late <- err })
	p := cl.peers["srv"]
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	eventually(t, "the second answer to wait in the socket", func() bool { return unreadBytes(conn) > 0 })
	select {
	case err := <-late:
		t.Skipf("the second call ended (%v) before its answer was seen in the socket: the machine is too slow for this test's %v", err, callTimeout)
	default:
	}
	if err := <-late; !errors.Is(err, ErrTimeout) {
		t.Fatalf("the second call, its answer unread: %v, want ErrTimeout", err)
	}
	release()
	if _, err := heartBeat(t, cl, "srv", 3); err != nil {
		t.Fatalf("a call once the reader caught up: %v", err)
	}
	if n := connects.Load(); n != 1 {
		t.Fatalf("%d connections: the connection was dropped while answers waited unread", n)
	}
}
