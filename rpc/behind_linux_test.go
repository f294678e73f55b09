//go:build linux

package rpc

import (
	"errors"
	"sync"
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
	release := holdReader(t, cl)
	defer release()

	late := make(chan error, 1)
	cl.SendHeartBeat("srv", hbRequest(2), func(_ *protocol.HeartBeatResponse, err error) { late <- err })
	p := cl.peers["srv"]
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	// Either the answer waits in the socket, or the call ended first (the machine too slow for
	// this test's timeout: the connection may then go as silent, which is not what is tested).
	var ended error
	eventually(t, "the second answer to wait in the socket", func() bool {
		select {
		case ended = <-late:
			return true
		default:
		}
		return unreadBytes(conn) > 0
	})
	if ended != nil {
		t.Skipf("the second call ended (%v) before its answer was seen in the socket: the machine is too slow for this test's %v", ended, callTimeout)
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

// A reader that reads nothing for stuckReader call timeouts while answers wait unread is stuck,
// not behind: its connection is dropped as a silent one, so a callback that never returns
// cannot keep a link whose every call times out (the reader held here for six timeouts).
func TestStuckReaderLosesItsConnection(t *testing.T) {
	const callTimeout = 200 * time.Millisecond
	s := startServer(t, &fakeHandler{}, nil)
	var connects atomic.Int32
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.CallTimeout = callTimeout
		o.OnPeerConnected = func(string) { connects.Add(1) }
	})
	eventually(t, "the connection to be ready", func() bool { return connects.Load() == 1 })
	release := holdReader(t, cl)
	defer release()
	// Calls that time out, their answers unread, until the reader has been stuck for longer
	// than stuckReader call timeouts: each sweep that fails one decides about the connection.
	stuckUntil := time.Now().Add((stuckReader + 2) * callTimeout)
	for i := int64(2); time.Now().Before(stuckUntil); i++ {
		done := make(chan struct{})
		cl.SendHeartBeat("srv", hbRequest(i), func(*protocol.HeartBeatResponse, error) { close(done) })
		select {
		case <-done: // a timeout: the reader is held
		case <-time.After(time.Until(stuckUntil) + callTimeout):
			// the connection is being dropped: its writer waits for the held reader to return
		}
	}
	release()
	eventually(t, "a new connection after the stuck reader's was dropped", func() bool {
		heartBeat(t, cl, "srv", 99)
		return connects.Load() >= 2
	})
}

// holdReader holds the client's reader for "srv" in the answer to a heartbeat until the
// returned release (idempotent) runs; it returns once the reader is held.
func holdReader(t *testing.T, cl *Client) (release func()) {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	cl.SendHeartBeat("srv", hbRequest(1), func(*protocol.HeartBeatResponse, error) {
		close(held)
		<-hold // the reader stays here
	})
	select {
	case <-held:
	case <-time.After(waitTimeout):
		release()
		t.Fatal("the first call was never answered")
	}
	return release
}
