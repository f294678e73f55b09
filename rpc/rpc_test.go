package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dledger-go/dledger/rpc/protocol"
)

func TestRoundTripEveryMessage(t *testing.T) {
	h := &fakeHandler{}
	s := startServer(t, h, nil)
	cl := newClient(t, map[string]string{"srv": s.Addr()}, nil)

	vote, err := callSync(t, func(done func(*protocol.VoteResponse, error)) {
		cl.SendVote("srv", &protocol.VoteRequest{Header: protocol.Header{Group: testGroup,
			RemoteID: testSelf, LocalID: "n1", LeaderID: "n1", Term: 5}, LedgerEndTerm: 4, LedgerEndIndex: 40}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantVote := protocol.VoteResponse{Header: protocol.Header{Group: testGroup, RemoteID: "n1",
		LocalID: testSelf, LeaderID: "n1", Term: 5, Code: protocol.CodeSuccess}, VoteResult: protocol.VoteAccept}
	if *vote != wantVote {
		t.Errorf("vote: got %+v, want %+v", *vote, wantVote)
	}

	hb, err := heartBeat(t, cl, "srv", 7)
	if err != nil {
		t.Fatal(err)
	}
	wantHB := protocol.HeartBeatResponse{Header: protocol.Header{Group: testGroup, RemoteID: "n1",
		LocalID: testSelf, LeaderID: "n1", Term: 7, Code: protocol.CodeSuccess}, LedgerEndTerm: 6, LedgerEndIndex: 70}
	if *hb != wantHB {
		t.Errorf("heartbeat: got %+v, want %+v", *hb, wantHB)
	}

	lt, err := callSync(t, func(done func(*protocol.LeadershipTransferResponse, error)) {
		cl.SendLeadershipTransfer("srv", &protocol.LeadershipTransferRequest{Header: protocol.Header{
			Group: testGroup, RemoteID: testSelf, LocalID: "n1", LeaderID: "n1", Term: 8},
			TransferID: "n1", TransfereeID: testSelf, TakeLeadershipLedgerIndex: 12}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantLT := protocol.LeadershipTransferResponse{Header: protocol.Header{Group: testGroup, RemoteID: "n1",
		LocalID: testSelf, LeaderID: testSelf, Term: 9, Code: protocol.CodeSuccess}}
	if *lt != wantLT {
		t.Errorf("transfer: got %+v, want %+v", *lt, wantLT)
	}

	meta, err := callSync(t, func(done func(*protocol.MetadataResponse, error)) {
		cl.SendMetadata("srv", &protocol.MetadataRequest{Header: protocol.Header{Group: testGroup,
			RemoteID: testSelf, LocalID: "tool"}}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := protocol.MetadataResponse{Header: protocol.Header{Group: testGroup, RemoteID: "tool",
		LocalID: testSelf, Code: protocol.CodeSuccess}, Role: protocol.LEADER, VoteFor: testSelf,
		LedgerEndTerm: 3, LedgerEndIndex: 99, Peers: "srv-127.0.0.1:1"}
	if *meta != wantMeta {
		t.Errorf("metadata: got %+v, want %+v", *meta, wantMeta)
	}

	// A request for another group reaches the handler, which answers UNKNOWN_GROUP.
	other := hbRequest(1)
	other.Group = "other"
	resp, err := callSync(t, func(done func(*protocol.HeartBeatResponse, error)) { cl.SendHeartBeat("srv", other, done) })
	if err != nil || resp.Code != protocol.CodeUnknownGroup {
		t.Errorf("other group: %+v, %v", resp, err)
	}
	if st := s.Stats(); st.Requests != 5 || st.BadFrames != 0 {
		t.Errorf("server stats %+v", st)
	}
}

// TestConcurrentCalls runs many calls from several goroutines and two clients at once, and
// checks every answer belongs to its own request (the term is echoed) and every done ran
// exactly once.
func TestConcurrentCalls(t *testing.T) {
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) { o.EventLoops = 2 })
	peers := map[string]string{"srv": s.Addr()}
	// The queue must hold a whole burst: a full queue fails calls at once by design. The call
	// timeout is generous: this test is about every call completing once with its own answer,
	// and 1200 calls at once under -race on a busy 2-core machine can take longer than the
	// default second.
	bigQueue := func(o *ClientOptions) { o.SendQueue, o.CallTimeout = 2048, waitTimeout }
	clients := []*Client{newClient(t, peers, bigQueue), newClient(t, peers, bigQueue)}

	const goroutines, perGoroutine = 8, 150
	var wg sync.WaitGroup
	var dones, failures atomic.Int64
	errs := make(chan error, goroutines*perGoroutine)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[g%len(clients)]
			var inner sync.WaitGroup
			for i := 0; i < perGoroutine; i++ {
				term := int64(g*perGoroutine + i)
				inner.Add(1)
				if i%3 == 0 {
					cl.SendVote("srv", &protocol.VoteRequest{Header: protocol.Header{Group: testGroup,
						RemoteID: testSelf, LocalID: "n1", LeaderID: "n1", Term: term}},
						func(r *protocol.VoteResponse, err error) {
							defer inner.Done()
							dones.Add(1)
							if err != nil || r.Term != term || r.VoteResult != protocol.VoteAccept {
								failures.Add(1)
								errs <- fmt.Errorf("vote %d: %+v %v", term, r, err)
							}
						})
					continue
				}
				cl.SendHeartBeat("srv", hbRequest(term), func(r *protocol.HeartBeatResponse, err error) {
					defer inner.Done()
					dones.Add(1)
					if err != nil || r.Term != term || r.LedgerEndIndex != term*10 {
						failures.Add(1)
						errs <- fmt.Errorf("heartbeat %d: %+v %v", term, r, err)
					}
				})
			}
			inner.Wait()
		}()
	}
	waitGroup(t, &wg, "every call to complete")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := dones.Load(); n != goroutines*perGoroutine {
		t.Fatalf("%d done calls for %d requests", n, goroutines*perGoroutine)
	}
}

// TestCallTimeout: a handler slower than the call timeout makes the call fail with
// ErrTimeout, once. Nothing else arrived on the connection meanwhile, so the client drops it
// as silent (TestSilentConnectionRedialled) and the late answer is lost with it; a late
// answer on a connection that is not silent is dropped quietly and costs nothing
// (TestSlowPeerKeepsConnection).
func TestCallTimeout(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{}), returned: make(chan struct{}, 8)}
	s := startServer(t, h, nil)
	var rpcErrs reasonCounter
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.CallTimeout = 100 * time.Millisecond
		o.OnRPCError = func(code, reason string) { rpcErrs.add(code + "/" + reason) }
	})

	_, err := heartBeat(t, cl, "srv", 1)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if rpcErrs.get("HEART_BEAT/timeout") != 1 {
		t.Errorf("OnRPCError not called for the timeout: %v", rpcErrs.n)
	}
	// Let the handler answer, then check the client is back in business. callSync's cleanup
	// checks the first done still ran only once.
	close(h.gate)
	<-h.returned
	eventually(t, "a call to succeed again", func() bool {
		_, err := heartBeat(t, cl, "srv", 2)
		return err == nil // ErrPeerDown while the silent connection is dropped and redialled
	})
	if n := cl.Stats().BadFrames; n != 0 {
		t.Errorf("a late answer was counted as %d bad frames", n)
	}
}

// TestTransferUsesTransferTimeout: a leadership transfer is answered after the transferee's
// election, so it outlives CallTimeout and ends with the answer, not ErrTimeout.
func TestTransferUsesTransferTimeout(t *testing.T) {
	const callTimeout = 250 * time.Millisecond
	h := &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestLeadershipTransfer}
	s := startServer(t, h, nil)
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.CallTimeout = callTimeout
		o.TransferTimeout = time.Hour
	})
	got := make(chan error, 1)
	sent := time.Now()
	cl.SendLeadershipTransfer("srv", &protocol.LeadershipTransferRequest{Header: protocol.Header{
		Group: testGroup, RemoteID: testSelf, LocalID: "n1", Term: 1}, TransfereeID: testSelf},
		func(_ *protocol.LeadershipTransferResponse, err error) { got <- err })
	eventually(t, "the transfer to reach the handler", func() bool { return h.active.Load() == 1 })
	// Heartbeats are answered meanwhile, as a transferee answers its leader's, until several
	// call timeouts have passed for the transfer, which must still be waiting.
	for time.Since(sent) < 4*callTimeout {
		if _, err := heartBeat(t, cl, "srv", 1); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		time.Sleep(callTimeout / 5)
	}
	select {
	case err := <-got:
		t.Fatalf("transfer ended before its answer: %v", err)
	default:
	}
	close(h.gate)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("transfer: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("transfer never completed")
	}
}

// TestPeerDownAndBack: while a peer is down, calls fail at once (done runs before Send
// returns) with ErrPeerDown; when it is back on the same port, calls succeed again.
func TestPeerDownAndBack(t *testing.T) {
	h := &fakeHandler{}
	opts := ServerOptions{Addr: "127.0.0.1:0", Auth: insecure}
	s, err := NewServer(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	cl := newClient(t, map[string]string{"srv": addr}, nil)
	if _, err := heartBeat(t, cl, "srv", 1); err != nil {
		t.Fatal(err)
	}

	stopServer(t, s)
	eventually(t, "the client to notice the peer is down", func() bool { return !cl.Connected("srv") })
	for i := 0; i < 3; i++ {
		ran := false
		var gotErr error
		cl.SendHeartBeat("srv", hbRequest(2), func(_ *protocol.HeartBeatResponse, err error) {
			ran, gotErr = true, err
		})
		if !ran || !errors.Is(gotErr, ErrPeerDown) {
			t.Fatalf("call while down: ran synchronously %v, err %v; want ErrPeerDown at once", ran, gotErr)
		}
	}

	s2, err := NewServer(h, ServerOptions{Addr: addr, Auth: insecure})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(); err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	t.Cleanup(func() { stopServer(t, s2) })
	eventually(t, "the client to reconnect", func() bool { return cl.Connected("srv") })
	if resp, err := heartBeat(t, cl, "srv", 3); err != nil || resp.Term != 3 {
		t.Fatalf("after the peer came back: %+v, %v", resp, err)
	}
}

// TestPendingCallsFailWhenPeerDies: calls waiting on a connection that dies fail with
// ErrConnLost (an ErrPeerDown that says the request went out) instead of waiting for their
// timeout.
func TestPendingCallsFailWhenPeerDies(t *testing.T) {
	// A raw listener that accepts and reads but never answers, then drops the connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	cl := newClient(t, map[string]string{"srv": ln.Addr().String()}, func(o *ClientOptions) {
		o.CallTimeout = time.Hour // only the dead connection can end these calls
	})
	conn := <-accepted
	got := make(chan error, 3)
	for i := 0; i < 3; i++ {
		cl.SendHeartBeat("srv", hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { got <- err })
	}
	// Wait until the three requests reached the listener, then drop the connection.
	buf := make([]byte, 1024)
	read := 0
	for read < 3*len(frameOf(hbReqCase, 1, hbRequest(1))) {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read += n
	}
	conn.Close()
	for i := 0; i < 3; i++ {
		select {
		case err := <-got:
			if !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrPeerDown) {
				t.Fatalf("got %v, want ErrConnLost (which is an ErrPeerDown): the requests were sent", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("pending call never completed")
		}
	}
}

func TestStartAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := NewServer(&fakeHandler{}, ServerOptions{Addr: ln.Addr().String(), Auth: insecure})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Start on a busy port: %v, want EADDRINUSE", err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after a failed Start: %v", err)
	}
	if _, err := NewServer(&fakeHandler{}, ServerOptions{Addr: "no-port"}); err == nil {
		t.Fatal("NewServer accepted an address without a port")
	}
}

func TestUnknownPeerAndClosedClient(t *testing.T) {
	s := startServer(t, &fakeHandler{}, nil)
	var rpcErrs reasonCounter
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.OnRPCError = func(code, reason string) { rpcErrs.add(reason) }
	})
	var got error
	cl.SendVote("nobody", &protocol.VoteRequest{}, func(_ *protocol.VoteResponse, err error) { got = err })
	if !errors.Is(got, ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", got)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	got = nil
	cl.SendHeartBeat("srv", hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { got = err })
	if !errors.Is(got, ErrClosed) {
		t.Fatalf("after Close: %v", got)
	}
	if rpcErrs.get(ReasonUnknownPeer) != 1 || rpcErrs.get(ReasonClosed) != 1 {
		t.Fatalf("OnRPCError reasons: %v", rpcErrs.n)
	}
	if _, err := NewClient(ClientOptions{Peers: map[string]string{"x": "bad"}, Auth: insecure}); err == nil {
		t.Fatal("NewClient accepted an address without a port")
	}
}

// TestCloseFailsPendingCalls: Close completes calls still waiting for an answer, before it
// returns.
func TestCloseFailsPendingCalls(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{})}
	s := startServer(t, h, nil)
	t.Cleanup(func() { close(h.gate) }) // runs before the server stops
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) { o.CallTimeout = time.Hour })
	var got atomic.Value
	cl.SendHeartBeat("srv", hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { got.Store(err) })
	eventually(t, "the request to reach the handler", func() bool { return h.active.Load() == 1 })
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err, _ := got.Load().(error); !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call after Close: %v, want ErrClosed", err)
	}
}

// TestServerBoundsInflightPerConn: one connection never has more than MaxInflightPerConn
// requests in handlers, the rest wait in the socket buffer, and all are served once the
// handlers unblock (the parked connection is woken).
func TestServerBoundsInflightPerConn(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{})}
	s := startServer(t, h, func(o *ServerOptions) {
		o.MaxInflightPerConn = 4
		o.Workers = 8
	})
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) { o.CallTimeout = time.Hour })

	const calls = 50
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < calls; i++ {
		wg.Add(1)
		cl.SendHeartBeat("srv", hbRequest(int64(i)), func(_ *protocol.HeartBeatResponse, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		})
	}
	eventually(t, "4 requests in handlers", func() bool { return h.active.Load() == 4 })
	close(h.gate)
	waitGroup(t, &wg, "every call to complete")
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d calls failed", n)
	}
	if m := h.maxActive.Load(); m != 4 {
		t.Fatalf("up to %d requests of one connection ran at once, limit 4", m)
	}
	if n := h.handled.Load(); n != calls {
		t.Fatalf("handled %d of %d", n, calls)
	}
}

func TestServerMaxConns(t *testing.T) {
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) { o.MaxConns = 1 })
	cl := newClient(t, map[string]string{"srv": s.Addr()}, nil)
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection above MaxConns: read %v, want it closed", err)
	}
	if _, err := heartBeat(t, cl, "srv", 1); err != nil {
		t.Fatalf("the first connection must keep working: %v", err)
	}
}

// TestServerStopWithBusyHandlerHonoursDeadline: Stop returns at its deadline even if a
// handler is stuck, and finishes once the handler returns.
func TestServerStopWithBusyHandlerHonoursDeadline(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{})}
	s, err := NewServer(h, ServerOptions{Addr: "127.0.0.1:0", Auth: insecure})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, map[string]string{"srv": s.Addr()}, nil)
	cl.SendHeartBeat("srv", hbRequest(1), func(*protocol.HeartBeatResponse, error) {})
	eventually(t, "the handler to be busy", func() bool { return h.active.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a stuck handler: %v, want DeadlineExceeded", err)
	}
	close(h.gate)
	_ = cl.Close()
	// The worker leaves once the handler returns; TestMain's leak check would catch it
	// otherwise.
	workersDone := make(chan struct{})
	go func() { s.workers.Wait(); close(workersDone) }()
	select {
	case <-workersDone:
	case <-time.After(waitTimeout):
		t.Fatal("workers did not exit after the handler returned")
	}
}

// TestStopWithExpiredContextLeavesNothingBehind: server.Server spends Stop's ctx on a
// leadership hand-over first, so rpc's Stop may get a ctx that has already ended. It
// returns at once, but the shutdown still completes in the background: once gnet has
// stopped, no goroutine of the server is left, without a second Stop. A later Stop waits
// for that shutdown and returns nil.
func TestStopWithExpiredContextLeavesNothingBehind(t *testing.T) {
	before := goleak.IgnoreCurrent()
	s, err := NewServer(&fakeHandler{}, ServerOptions{Addr: "127.0.0.1:0", Auth: insecure})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended ctx: %v", err)
	}
	select {
	case <-s.runDone:
	case <-time.After(waitTimeout):
		t.Fatal("gnet did not stop")
	}
	goleak.VerifyNone(t, append(gnetPool, before)...)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
