package rpc

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestMain fails the package if any test leaves a goroutine behind. gnet keeps a default
// ants goroutine pool for the life of the process (created by its package init, never
// released); those goroutines are the only ones ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, gnetPool...)
}

// gnetPool ignores gnet's process-wide goroutine pool in leak checks.
var gnetPool = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
}

// waitTimeout bounds every wait in these tests. It is generous on purpose: the tests assert
// that something happens, never how fast, so a busy 2-core machine does not make them flaky.
const waitTimeout = 10 * time.Second

// eventually polls cond until it holds or waitTimeout passes (dledgertest.Eventually).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	dledgertest.Eventually(t, waitTimeout, what, cond)
}

// waitGroup waits for wg, failing the test (instead of hanging it) after waitTimeout.
func waitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// fakeHandler answers like a member of group "g" with id "srv". Responses echo request
// fields so a test can tell which request an answer belongs to. gate, when set, holds every
// request (only those of code gateOnly, if that is set) until it is closed; active and
// maxActive count handlers running at once.
type fakeHandler struct {
	gate      chan struct{}
	gateOnly  protocol.RequestCode
	active    atomic.Int32
	maxActive atomic.Int32
	handled   atomic.Int32
	returned  chan struct{} // if set, receives after each gated handler returns
}

const (
	testGroup = "g"
	testSelf  = "srv"
)

func (h *fakeHandler) enter(code protocol.RequestCode) {
	n := h.active.Add(1)
	for {
		m := h.maxActive.Load()
		if n <= m || h.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	if h.gate != nil && (h.gateOnly == 0 || h.gateOnly == code) {
		<-h.gate
	}
}

func (h *fakeHandler) leave() {
	h.active.Add(-1)
	h.handled.Add(1)
	if h.returned != nil {
		h.returned <- struct{}{}
	}
}

// answer builds the response header: UNKNOWN_GROUP / UNKNOWN_MEMBER as the elector would.
func answer(req *protocol.Header) protocol.Header {
	code := protocol.CodeSuccess
	switch {
	case req.Group != testGroup:
		code = protocol.CodeUnknownGroup
	case req.RemoteID != testSelf:
		code = protocol.CodeUnknownMember
	}
	return protocol.Header{Group: testGroup, RemoteID: req.LocalID, LocalID: testSelf,
		LeaderID: req.LeaderID, Term: req.Term, Code: code}
}

func (h *fakeHandler) HandleVote(req *protocol.VoteRequest) *protocol.VoteResponse {
	h.enter(protocol.RequestVote)
	defer h.leave()
	return &protocol.VoteResponse{Header: answer(&req.Header), VoteResult: protocol.VoteAccept}
}

func (h *fakeHandler) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	h.enter(protocol.RequestHeartBeat)
	defer h.leave()
	return &protocol.HeartBeatResponse{Header: answer(&req.Header), LedgerEndTerm: req.Term - 1,
		LedgerEndIndex: req.Term * 10}
}

// HandleLeadershipTransfer replies from another goroutine, as the elector does after its
// election.
func (h *fakeHandler) HandleLeadershipTransfer(req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	h.enter(protocol.RequestLeadershipTransfer)
	resp := &protocol.LeadershipTransferResponse{Header: answer(&req.Header)}
	resp.Term = req.Term + 1
	resp.LeaderID = req.TransfereeID
	go func() {
		defer h.leave()
		reply(resp)
	}()
}

func (h *fakeHandler) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	h.enter(protocol.RequestMetadata)
	defer h.leave()
	return &protocol.MetadataResponse{Header: answer(&req.Header), Role: protocol.LEADER,
		VoteFor: testSelf, LedgerEndTerm: 3, LedgerEndIndex: 99, Peers: "srv-127.0.0.1:1"}
}

// startServer starts a server on a free loopback port and stops it at cleanup.
func startServer(t testing.TB, h Handler, mod func(*ServerOptions)) *Server {
	t.Helper()
	opts := ServerOptions{Addr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&opts)
	}
	insecureUnlessKeyed(&opts.Auth)
	s, err := NewServer(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	return s
}

// insecure is the Auth of the tests that predate peer authentication.
var insecure = Auth{Insecure: true}

// insecureUnlessKeyed makes the tests that predate peer authentication run as they did:
// without a key, the helpers say Insecure explicitly.
func insecureUnlessKeyed(a *Auth) {
	if a.Keys.Len() == 0 && a.PeerKeys == nil {
		a.Insecure = true
	}
}

func stopServer(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// newClient connects to the given peers and waits until every connection is up.
func newClient(t testing.TB, peers map[string]string, mod func(*ClientOptions)) *Client {
	t.Helper()
	opts := ClientOptions{Peers: peers, Logger: zaptest.NewLogger(t),
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}
	if mod != nil {
		mod(&opts)
	}
	insecureUnlessKeyed(&opts.Auth)
	cl, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	for id := range peers {
		eventually(t, "connection to "+id, func() bool { return cl.Connected(id) })
	}
	return cl
}

// result is what a done callback received, plus how many times it ran.
type result[T any] struct {
	resp  *T
	err   error
	calls int32
}

// callSync sends with send and waits for done. It fails the test if done runs twice (checked
// again at cleanup, so a late second call is caught too) or never.
func callSync[T any](t testing.TB, send func(done func(*T, error))) (*T, error) {
	t.Helper()
	var calls atomic.Int32
	got := make(chan result[T], 2)
	send(func(resp *T, err error) {
		calls.Add(1)
		got <- result[T]{resp: resp, err: err}
	})
	t.Cleanup(func() {
		if n := calls.Load(); n != 1 {
			t.Errorf("done ran %d times", n)
		}
	})
	select {
	case r := <-got:
		return r.resp, r.err
	case <-time.After(waitTimeout):
		t.Fatal("done never ran")
		return nil, nil
	}
}

func hbRequest(term int64) *protocol.HeartBeatRequest {
	return &protocol.HeartBeatRequest{Header: protocol.Header{Group: testGroup, RemoteID: testSelf,
		LocalID: "n1", LeaderID: "n1", Term: term}}
}

func heartBeat(t testing.TB, cl *Client, to string, term int64) (*protocol.HeartBeatResponse, error) {
	t.Helper()
	return callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
		cl.SendHeartBeat(to, hbRequest(term), done)
	})
}

// reasonCounter records OnBadFrame calls by reason.
type reasonCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *reasonCounter) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = make(map[string]int)
	}
	r.n[reason]++
}

func (r *reasonCounter) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// readFrame reads one frame body from a raw connection.
func readFrame(conn net.Conn) ([]byte, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(conn, body)
	return body, err
}

// hostileCaseAllocLimit bounds what the whole process may allocate while the live server
// refuses one hostile frame (TestHostileInput). A case costs some tens of KiB (a connection,
// a heartbeat round trip, log lines); the msgpack library would allocate 1 MiB or more for
// a single lying string header, which this must catch.
const hostileCaseAllocLimit = 256 << 10

// checkAllocated measures the bytes the process allocates from now until the returned
// function runs, and fails the test if they exceed limit. Use it as
// defer checkAllocated(t, limit)().
func checkAllocated(t testing.TB, limit uint64) func() {
	t.Helper()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() {
		t.Helper()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > limit {
			t.Errorf("allocated %d KiB, limit %d KiB", grew>>10, limit>>10)
		}
	}
}

// readRequest reads and decodes one request frame from conn; false on any failure.
func readRequest(conn net.Conn) (request, bool) {
	var req request
	body, err := readFrame(conn)
	if err != nil {
		return req, false
	}
	var fd frameDecoder
	return req, fd.decodeRequest(body, &req) == nil
}

// answerOnce is a fake peer on loopback: on its one connection it reads one request, writes
// reply(the request's id) (then half-closes if closeWrite), and holds the connection until the
// client hangs up. done is closed when it has finished.
func answerOnce(t *testing.T, reply func(id uint64) []byte, closeWrite bool) (addr string, done <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(waitTimeout))
		req, ok := readRequest(conn)
		if !ok {
			return
		}
		_, _ = conn.Write(reply(req.id))
		if closeWrite {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
		_, _ = conn.Read(make([]byte, 1)) // until the client hangs up
	}()
	return ln.Addr().String(), served
}

// dialRaw dials addr, for tests that speak bytes to a server; closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	return conn
}
