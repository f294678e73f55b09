package rpc

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestSilentConnectionRedialled: a peer that accepts a connection and then goes silent (as
// one behind a partition that drops packets: the connection stays open, nothing comes back)
// costs the client that connection once a call has timed out with nothing read for a call
// timeout. The client closes it and redials, without waiting for the peer to close, and
// works against a live server that takes over the address.
func TestSilentConnectionRedialled(t *testing.T) {
	const callTimeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var held []net.Conn // never closed by this side until the end: silent, not gone
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	next := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			held = append(held, c)
			return c
		case <-time.After(waitTimeout):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	cl := newClient(t, map[string]string{"p": addr}, func(o *ClientOptions) { o.CallTimeout = callTimeout })
	first := next("first connection")
	go func() { _, _ = io.Copy(io.Discard, first) }() // reads what comes, answers nothing

	if _, err := heartBeat(t, cl, "p", 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("call to a silent peer: %v, want ErrTimeout", err)
	}
	next("redial after the silent connection timed out")
	// The client closed the silent connection itself (the peer never did).
	_ = first.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := first.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the silent connection was left open: %v", err)
	}

	// A live server takes over the address; the client finds it and its calls succeed.
	ln.Close()
	for range accepted {
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) { o.Addr = addr })
	_ = s
	eventually(t, "a call to succeed against the live server", func() bool {
		if !cl.Connected("p") {
			return false
		}
		resp, err := heartBeat(t, cl, "p", 2)
		return err == nil && resp.Term == 2
	})
}

// TestSlowPeerKeepsConnection: a peer that answers some calls after their timeout but keeps
// answering others is slow, not gone: the calls that time out fail with ErrTimeout, their
// late answers are dropped quietly (not bad frames), and the connection is kept: the peer
// sees a single connection for the whole test.
func TestSlowPeerKeepsConnection(t *testing.T) {
	const callTimeout = 400 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts := make(chan struct{}, 64)
	var wg sync.WaitGroup
	// Cleanups run last-registered first: the client (newClient's cleanup) closes its
	// connections, which ends the fake peer's goroutines, before these wait for them.
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepts <- struct{}{}:
			default:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveSlowly(conn, 3*callTimeout)
			}()
		}
	}()
	cl := newClient(t, map[string]string{"p": ln.Addr().String()}, func(o *ClientOptions) { o.CallTimeout = callTimeout })

	var okN, timeoutN, otherN atomic.Int32
	sent := 0
	for start := time.Now(); time.Since(start) < 10*callTimeout; time.Sleep(callTimeout / 10) {
		sent++ // the client numbers its calls 1, 2, ...: this one's id
		done := make(chan struct{})
		cl.SendHeartBeat("p", hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) {
			switch {
			case err == nil:
				okN.Add(1)
			case errors.Is(err, ErrTimeout):
				timeoutN.Add(1)
			default:
				otherN.Add(1)
			}
			close(done)
		})
		if sent%2 == 0 { // answered at once; odd ones time out in the background
			select {
			case <-done:
			case <-time.After(waitTimeout):
				t.Fatal("call never completed")
			}
		}
	}
	eventually(t, "every call to complete", func() bool { return int(okN.Load()+timeoutN.Load()+otherN.Load()) == sent })
	if n := len(accepts); n != 1 {
		t.Fatalf("the peer saw %d connections; a slow peer that answers must keep its one", n)
	}
	if okN.Load() == 0 || timeoutN.Load() == 0 || otherN.Load() != 0 {
		t.Fatalf("%d answered, %d timed out, %d failed otherwise; want answers, timeouts and nothing else",
			okN.Load(), timeoutN.Load(), otherN.Load())
	}
	if st := cl.Stats(); st.BadFrames != 0 {
		t.Fatalf("late answers counted as %d bad frames", st.BadFrames)
	}
	_ = cl.Close()
}

// serveSlowly answers heartbeats on conn: requests with an even id at once, odd ones after
// delay (later than the caller's timeout), until the connection closes.
func serveSlowly(conn net.Conn, delay time.Duration) {
	defer conn.Close()
	var mu sync.Mutex
	var late sync.WaitGroup
	defer late.Wait()
	reply := func(id uint64) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = conn.Write(frameOf(hbRespCase, id, &protocol.HeartBeatResponse{Header: protocol.Header{Code: protocol.CodeSuccess}}))
	}
	var fd frameDecoder
	var req request
	for {
		body, err := readFrame(conn)
		if err != nil || fd.decodeRequest(body, &req) != nil {
			return
		}
		id := req.id
		if id%2 == 0 {
			reply(id)
			continue
		}
		late.Add(1)
		time.AfterFunc(delay, func() {
			defer late.Done()
			reply(id)
		})
	}
}

// TestIdleConnectionsClosed: the server closes a connection that never completes a frame
// after FirstFrameTimeout, and one that completed frames but then sits idle after
// IdleTimeout, without counting either as a bad frame; a member's client whose idle
// connection is closed redials and its next call works.
func TestIdleConnectionsClosed(t *testing.T) {
	const first, idle = 200 * time.Millisecond, 500 * time.Millisecond
	var reasons reasonCounter
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) {
		o.FirstFrameTimeout, o.IdleTimeout = first, idle
		o.OnBadFrame = reasons.add
	})
	dial := func(t *testing.T) net.Conn { return dialRaw(t, s.Addr()) }
	// closedAfter waits for the server to close conn and returns how long that took from since.
	closedAfter := func(t *testing.T, conn net.Conn, since time.Time) time.Duration {
		t.Helper()
		if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("idle connection not closed: %v", err)
		}
		return time.Since(since)
	}

	t.Run("never a frame", func(t *testing.T) {
		opened := time.Now()
		conn := dial(t)
		if d := closedAfter(t, conn, opened); d < first {
			t.Fatalf("closed after %v, before FirstFrameTimeout %v", d, first)
		}
	})

	t.Run("idle after frames", func(t *testing.T) {
		conn := dial(t)
		// Busy for longer than FirstFrameTimeout and IdleTimeout together: never closed
		// while frames keep coming.
		var last time.Time // before the last frame was sent: the server saw it later
		for start := time.Now(); time.Since(start) < first+idle; time.Sleep(idle / 10) {
			last = time.Now()
			if _, err := conn.Write(frameOf(hbReqCase, 1, hbRequest(1))); err != nil {
				t.Fatal(err)
			}
			if _, err := readFrame(conn); err != nil {
				t.Fatalf("busy connection closed: %v", err)
			}
		}
		if d := closedAfter(t, conn, last); d < idle {
			t.Fatalf("closed %v after its last frame, before IdleTimeout %v", d, idle)
		}
	})

	t.Run("client redials", func(t *testing.T) {
		// Count the client's connections rather than sample cl.Connected: the client redials
		// within about a millisecond of the server closing the idle connection, so a poll of
		// "not connected" can miss the gap entirely. A second connection is proof that the
		// first one was closed (the client keeps one per peer) and that the client redialled.
		var conns atomic.Int32
		cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
			o.OnPeerConnected = func(string) { conns.Add(1) }
		})
		if _, err := heartBeat(t, cl, "srv", 1); err != nil {
			t.Fatal(err)
		}
		before := conns.Load() // 1, unless a busy machine let the bound pass already
		eventually(t, "the idle connection to be closed and the client to redial", func() bool { return conns.Load() > before })
		eventually(t, "the new connection to be up", func() bool { return cl.Connected("srv") })
		if _, err := heartBeat(t, cl, "srv", 2); err != nil {
			t.Fatalf("call after the server closed the idle connection: %v", err)
		}
	})

	if st := s.Stats(); st.BadFrames != 0 {
		t.Fatalf("idle closes counted as %d bad frames: %v", st.BadFrames, reasons.n)
	}
}

// TestIdleBoundSparesRequestInProgress: a connection whose request is still in a handler
// (a leadership transfer waits for an election) is not idle, however long that takes.
func TestIdleBoundSparesRequestInProgress(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestLeadershipTransfer}
	s := startServer(t, h, func(o *ServerOptions) { o.FirstFrameTimeout, o.IdleTimeout = idle, idle })
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) { o.TransferTimeout = time.Hour })
	got := make(chan error, 1)
	cl.SendLeadershipTransfer("srv", &protocol.LeadershipTransferRequest{Header: protocol.Header{
		Group: testGroup, RemoteID: testSelf, LocalID: "n1", Term: 1}, TransfereeID: testSelf},
		func(_ *protocol.LeadershipTransferResponse, err error) { got <- err })
	eventually(t, "the transfer to reach the handler", func() bool { return h.active.Load() == 1 })
	time.Sleep(4 * idle) // the bound passes several times while the request is in progress
	close(h.gate)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("transfer: %v (its connection was closed as idle)", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("transfer never completed")
	}
}

// TestConnFloodFromOneSource: a host that opens connections and says nothing gets at most
// MaxConnsPerIP of them, the rest closed at once, and even those are closed after
// FirstFrameTimeout; a peer on another address is served throughout, although the flood
// is larger than MaxConns minus one, and the flooding address can connect again afterwards.
func TestConnFloodFromOneSource(t *testing.T) {
	const (
		perIP = 4
		flood = 40
		first = 500 * time.Millisecond
	)
	var reasons reasonCounter
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) {
		o.MaxConns = 16
		o.MaxConnsPerIP = perIP
		o.FirstFrameTimeout = first
		o.OnBadFrame = reasons.add
	})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.Dial("tcp", s.Addr()) // from 127.0.0.1
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Every flood connection is closed, at once beyond the bound, the rest once idle too long.
	openAt := make(chan time.Duration, flood)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
			if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				openAt <- -1
				return
			}
			openAt <- time.Since(start)
		}()
	}

	// Meanwhile a peer on another address (loopback is all of 127/8) is served.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	peer, err := d.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	_ = peer.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := peer.Write(frameOf(hbReqCase, 1, hbRequest(1))); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(peer); err != nil {
		t.Fatalf("a peer on another address was locked out by the flood: %v", err)
	}

	waitGroup(t, &wg, "the flood connections to be closed")
	close(openAt)
	late := 0
	for d := range openAt {
		switch {
		case d < 0:
			t.Fatal("a flood connection was never closed")
		case d >= first:
			late++
		}
	}
	if late > perIP {
		t.Fatalf("%d flood connections were held until the first-frame timeout; at most %d may be", late, perIP)
	}
	// The address may connect again: its slots were freed.
	again, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	_ = again.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := again.Write(frameOf(hbReqCase, 2, hbRequest(2))); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(again); err != nil {
		t.Fatalf("the flooding address could not connect after its connections closed: %v", err)
	}
	if st := s.Stats(); st.BadFrames != 0 {
		t.Fatalf("idle or refused connections counted as %d bad frames: %v", st.BadFrames, reasons.n)
	}
}

// TestShortCallTimesOutBehindLongOne: the timeout timer is armed for the earliest pending
// deadline, not for the first call's. A leadership transfer (TransferTimeout of an hour) is
// pending on a peer that never answers when an ordinary call goes out: that call must still
// end with ErrTimeout after CallTimeout, not wait behind the transfer's deadline.
func TestShortCallTimesOutBehindLongOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	frames := make(chan struct{}, 16)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for { // reads every request, answers none
			if _, err := readFrame(c); err != nil {
				return
			}
			frames <- struct{}{}
		}
	}()
	cl := newClient(t, map[string]string{"p": ln.Addr().String()}, func(o *ClientOptions) {
		o.CallTimeout = 100 * time.Millisecond
		o.TransferTimeout = time.Hour
	})
	eventually(t, "the client to connect", func() bool { return cl.Connected("p") })
	transfer := make(chan error, 1) // done runs once
	cl.SendLeadershipTransfer("p", &protocol.LeadershipTransferRequest{Header: protocol.Header{
		Group: testGroup, RemoteID: "p", LocalID: testSelf, Term: 1}, TransfereeID: "p"},
		func(_ *protocol.LeadershipTransferResponse, err error) { transfer <- err })
	select {
	case <-frames: // the transfer is on the wire, so the timer is armed for its deadline
	case <-time.After(waitTimeout):
		t.Fatal("the transfer request never arrived")
	}
	if _, err := heartBeat(t, cl, "p", 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("heartbeat behind a pending transfer: %v, want ErrTimeout", err)
	}
	// The silent connection is then dropped (TestSilentConnectionRedialled), failing the
	// transfer with it; it must not have timed out.
	select {
	case err := <-transfer:
		if errors.Is(err, ErrTimeout) {
			t.Fatalf("the transfer timed out: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the transfer did not end with its connection")
	}
}

// sweepArmed says whether p's current connection has its timeout timer armed.
func sweepArmed(p *peer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sweep != nil && !p.sweep.at.IsZero()
}

// TestAnsweredCallsLeaveNoTimerArmed: once every call on a connection is answered, its
// timeout timer is stopped, so a healthy connection between calls causes no wake-up. A timer
// left to fire at an answered call's deadline woke an idle leader once a second per peer.
func TestAnsweredCallsLeaveNoTimerArmed(t *testing.T) {
	s := startServer(t, &fakeHandler{}, nil)
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, func(o *ClientOptions) { o.CallTimeout = time.Hour })
	p := cl.peers[testSelf]
	for i := range 5 {
		if _, err := heartBeat(t, cl, testSelf, int64(i)); err != nil {
			t.Fatal(err)
		}
		// The answer's done ran after the call left pending; the writer may still be about to
		// arm the timer for it, which finds nothing pending, so the state settles at once.
		eventually(t, "the timer to be stopped", func() bool { return !sweepArmed(p) })
	}
	// And a pending call does arm it (the check above is not vacuous).
	h := &fakeHandler{gate: make(chan struct{})}
	s2 := startServer(t, h, nil)
	cl2 := newClient(t, map[string]string{testSelf: s2.Addr()}, func(o *ClientOptions) { o.CallTimeout = time.Hour })
	done := make(chan error, 1)
	cl2.SendHeartBeat(testSelf, hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { done <- err })
	p2 := cl2.peers[testSelf]
	eventually(t, "the timer to be armed for the pending call", func() bool { return sweepArmed(p2) })
	close(h.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPeerGoneOnlyWhenNothingListens: OnPeerGone reports a peer whose connection was closed
// by the other end and whose port then refuses the redial, and nothing else. A peer that
// closes the connection but still accepts (a restart, an idle close) is not gone.
func TestPeerGoneOnlyWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	next := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(waitTimeout):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	gone := make(chan string, 4)
	newClient(t, map[string]string{"p": ln.Addr().String()}, func(o *ClientOptions) {
		o.OnPeerGone = func(id string) { gone <- id }
	})
	next("first connection").Close() // closed by the peer, which still listens
	next("redial after the close").Close()
	// The verdict on the first redial was given before that connection was served, so
	// before this third one was dialled.
	last := next("redial after the second close")
	select {
	case id := <-gone:
		t.Fatalf("%s reported gone while its port accepts connections", id)
	default:
	}
	ln.Close() // now nothing listens: the close below is followed by a refused redial
	last.Close()
	select {
	case id := <-gone:
		if id != "p" {
			t.Fatalf("gone: %q, want p", id)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the peer was never reported gone")
	}
}

// TestRedialVerdict: the errors a real dial returns are judged through their wrapping. A
// reset dial, or a handshake reset by the peer, is a process caught closing its port, so it
// waits for the next dial's verdict.
func TestRedialVerdict(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNRESET)}
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)}
	for _, c := range []struct {
		err  error
		want int
	}{{refused, peerGone}, {reset, peerClosing}, {&handshakeError{refusal(reset)}, peerClosing},
		{timeout, peerMayLive}, {nil, peerMayLive}} {
		if got := redialVerdict(c.err); got != c.want {
			t.Errorf("redialVerdict(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestPeerGoneAfterResetsWhileClosing: a dying peer's port can complete a redial's TCP
// handshake and then reset it, as the kernel closes the listening socket (redialVerdict). The
// client asks again at once instead of giving up on the verdict, so the refusal that follows
// still reports the peer gone. Keyed, so the reset lands in the authentication handshake, where
// it is seen in real crashes. The peer's side is a proxy in front of a real server: it closes
// the served connection, resets the next two dials and then stops listening.
func TestPeerGoneAfterResetsWhileClosing(t *testing.T) {
	keys := newKeys(t)
	var reasons reasonCounter
	srv := keyedServer(t, &fakeHandler{}, keys, &reasons, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan net.Conn, 1)
	resets := make(chan struct{}, 4)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			c.Close()
			return
		}
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
		served <- c
		for i := 0; i < 2; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close() // a reset, before the handshake completes
			resets <- struct{}{}
		}
		ln.Close() // the process is gone: the next dial is refused
	}()
	gone := make(chan string, 4)
	newClient(t, map[string]string{testSelf: ln.Addr().String()}, func(o *ClientOptions) {
		o.Auth = keyedAuth(keys, "n1")
		o.OnPeerGone = func(id string) { gone <- id }
	})
	(<-served).Close() // the peer closes the connection it served
	select {
	case id := <-gone:
		if id != testSelf {
			t.Fatalf("gone: %q, want %s", id, testSelf)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the peer was never reported gone (%d resets seen)", len(resets))
	}
	if len(resets) != 2 {
		t.Fatalf("reported gone after %d resets, want 2: it did not wait for the refusal", len(resets))
	}
}

var gnetPoolReleased bool

// TestReleaseGnetWorkerPool: after ReleaseGnetWorkerPool no goroutine of gnet's pool is left
// to wake the process, and a server and a client still exchange calls.
func TestReleaseGnetWorkerPool(t *testing.T) {
	poolGoroutines := func() int {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return strings.Count(string(buf), "panjf2000/ants")
	}
	if runtime.GOOS == "windows" {
		t.Skip("gnet runs connections on its pool on Windows; the release does nothing there")
	}
	if gnetPoolReleased {
		t.Skip("released by an earlier run of this test in this process (-count)")
	}
	if poolGoroutines() == 0 {
		t.Fatal("no goroutine of gnet's pool before the release: the check below proves nothing")
	}
	ReleaseGnetWorkerPool()
	gnetPoolReleased = true
	eventually(t, "the pool's goroutines to exit", func() bool { return poolGoroutines() == 0 })
	s := startServer(t, &fakeHandler{}, nil)
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, nil)
	if _, err := heartBeat(t, cl, testSelf, 1); err != nil {
		t.Fatal(err)
	}
}

// TestOnPeerConnected: the callback comes once per connection, for the peer dialled, when the
// connection can carry calls (a heartbeat sent from inside the callback is answered, and the
// hello, if the client sends one, went out too), and not while the peer's port refuses. So a
// member that starts after us is reported as soon as we reach it, and again after each
// reconnection. Without a hello, keyed, and with a hello in the clear.
func TestOnPeerConnected(t *testing.T) {
	keys := newKeys(t)
	for _, c := range []struct {
		name   string
		client Auth
		server Auth
		hello  bool
	}{
		{"insecure-no-hello", insecure, insecure, false},
		{"insecure-hello", Auth{Insecure: true, Group: testGroup, SelfID: "n1"}, insecure, true},
		{"keyed", keyedAuth(keys, "n1"), Auth{Keys: keys, Group: testGroup, SelfID: testSelf, Members: []string{"n1", testSelf}}, true},
	} {
		t.Run(c.name, func(t *testing.T) { testOnPeerConnected(t, c.client, c.server, c.hello) })
	}
}

// orderHandler records the hellos and heartbeats a server receives.
type orderHandler struct {
	*fakeHandler
	mu  sync.Mutex
	got []string
}

func (h *orderHandler) note(what string) {
	h.mu.Lock()
	h.got = append(h.got, what)
	h.mu.Unlock()
}

func (h *orderHandler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func (h *orderHandler) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	h.note("heartbeat")
	return h.fakeHandler.HandleHeartBeat(req)
}

func testOnPeerConnected(t *testing.T, clientAuth, serverAuth Auth, hello bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the client's dials are refused until a server takes the port
	logs, observed := zapobserver.New(zap.DebugLevel)
	var cl atomic.Pointer[Client]
	var callbacks atomic.Int32
	answered := make(chan error, 8)
	c, err := NewClient(ClientOptions{Peers: map[string]string{testSelf: addr}, Auth: clientAuth, Logger: zap.New(logs),
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond,
		OnPeerConnected: func(id string) {
			callbacks.Add(1)
			if id != testSelf {
				answered <- errors.New("callback for " + id)
				return
			}
			cl.Load().SendHeartBeat(testSelf, hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { answered <- err })
		}})
	if err != nil {
		t.Fatal(err)
	}
	cl.Store(c)
	t.Cleanup(func() { _ = c.Close() })
	eventually(t, "three refused dials", func() bool {
		return observed.FilterMessage("rpc: dial failed").Len() >= 3
	})
	if n := callbacks.Load(); n != 0 {
		t.Fatalf("%d callbacks while nothing listened", n)
	}
	for i := 1; i <= 2; i++ {
		h := &orderHandler{fakeHandler: &fakeHandler{}}
		srv := startServer(t, h, func(o *ServerOptions) {
			o.Addr = addr
			o.Auth = serverAuth
			o.OnPeerHello = func(string) { h.note("hello") }
		})
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("connection %d: the call made from the callback: %v", i, err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("connection %d: no callback", i)
		}
		// The server's workers may run the two in either order, so the set is what is checked.
		want := []string{"heartbeat"}
		if hello {
			want = []string{"heartbeat", "hello"}
		}
		eventually(t, "the server to see "+strings.Join(want, " and "), func() bool {
			got := h.seen()
			slices.Sort(got)
			return slices.Equal(got, want)
		})
		stopServer(t, srv) // closes the connection; the next server is a new one
		eventually(t, "the client to see the close", func() bool { return !c.Connected(testSelf) })
		if n := callbacks.Load(); n != int32(i) {
			t.Fatalf("%d callbacks after %d connections", n, i)
		}
	}
}
