package rpc

// Heartbeats answered on the event loop (server_inline.go, docs/protocol.md 4.5): never behind
// the workers, handed to workers of their own when the Handler can not answer at once, and in
// order with the worker's answers on a sealed connection.

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// inlineHandler is a fakeHandler that also answers heartbeats inline (InlineHeartBeater),
// unless refuse says it can not; inline counts the heartbeats it answered there.
type inlineHandler struct {
	*fakeHandler
	refuse atomic.Bool
	inline atomic.Int32
}

func (h *inlineHandler) TryHandleHeartBeat(req *protocol.HeartBeatRequest) (*protocol.HeartBeatResponse, bool) {
	if h.refuse.Load() {
		return nil, false
	}
	h.inline.Add(1)
	return &protocol.HeartBeatResponse{Header: answer(&req.Header), LedgerEndTerm: req.Term - 1,
		LedgerEndIndex: req.Term * 10}, true
}

// voteAsync sends a vote request whose answer arrives on the returned channel.
func voteAsync(cl *Client, term int64) <-chan error {
	done := make(chan error, 1)
	cl.SendVote(testSelf, &protocol.VoteRequest{Header: protocol.Header{Group: testGroup, RemoteID: testSelf,
		LocalID: "n1", LeaderID: "n1", Term: term}, LedgerEndIndex: -1, LedgerEndTerm: -1},
		func(_ *protocol.VoteResponse, err error) { done <- err })
	return done
}

// Issue 29: with every worker waiting (a vote's fsync that does not end), a heartbeat is still
// answered, by the event loop, and a heartbeat the Handler can not answer at once goes to the
// heartbeat workers, not behind the vote. Before, both waited in the workers' queue until the
// vote returned.
func TestHeartBeatIsAnsweredWhileTheWorkersWait(t *testing.T) {
	h := &inlineHandler{fakeHandler: &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestVote}}
	s := startServer(t, h, func(o *ServerOptions) { o.Workers = 1 })
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, nil)
	vote := voteAsync(cl, 7)
	eventually(t, "the vote holding the only worker", func() bool { return h.active.Load() == 1 })

	resp, err := heartBeat(t, cl, testSelf, 7)
	if err != nil || resp.Code != protocol.CodeSuccess || resp.LedgerEndIndex != 70 || h.inline.Load() != 1 {
		t.Fatalf("heartbeat behind a waiting vote: %+v, %v; %d answered inline", resp, err, h.inline.Load())
	}
	h.refuse.Store(true) // the Handler can not answer at once: a heartbeat worker must
	resp, err = heartBeat(t, cl, testSelf, 8)
	if err != nil || resp.Code != protocol.CodeSuccess || resp.LedgerEndIndex != 80 || h.inline.Load() != 1 {
		t.Fatalf("heartbeat left to the workers, behind a waiting vote: %+v, %v; %d answered inline", resp, err, h.inline.Load())
	}
	select {
	case err := <-vote:
		t.Fatalf("the vote returned (%v) before its gate opened", err)
	default:
	}
	close(h.gate)
	if err := <-vote; err != nil {
		t.Fatalf("the vote: %v", err)
	}
}

// A Handler that does not implement InlineHeartBeater is served as before: every heartbeat by
// the ordinary workers (the tests that block heartbeats in handlers rely on it).
func TestHeartBeatOfAPlainHandlerGoesToTheWorkers(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestHeartBeat}
	s := startServer(t, h, nil)
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, nil)
	got := make(chan error, 1)
	cl.SendHeartBeat(testSelf, hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { got <- err })
	eventually(t, "the heartbeat in its handler", func() bool { return h.active.Load() == 1 })
	close(h.gate)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// On a sealed connection the peer opens frames in the order they were sealed: an answer the
// event loop writes must not overtake one a worker sealed before it and queued for the loop.
// Votes answered by workers and heartbeats answered on the loop, interleaved on one
// connection, all arrive, and no frame fails to open (the client would close the connection
// and fail every call on it).
func TestInlineAnswersKeepTheSealedOrder(t *testing.T) {
	keys := newKeys(t)
	var reasons reasonCounter
	h := &inlineHandler{fakeHandler: &fakeHandler{}}
	s := keyedServer(t, h, keys, &reasons, func(o *ServerOptions) { o.MaxInflightPerConn = 4096 })
	cl := newClient(t, map[string]string{testSelf: s.Addr()}, func(o *ClientOptions) {
		o.Auth = keyedAuth(keys, "n1")
		o.SendQueue = 8192
		o.CallTimeout = waitTimeout // under -race 4,000 calls take seconds; only failures count
	})
	const rounds = 2000
	var wg sync.WaitGroup
	var failed atomic.Int32
	var first atomic.Pointer[error]
	count := func(err error) {
		if err != nil {
			failed.Add(1)
			first.CompareAndSwap(nil, &err)
		}
		wg.Done()
	}
	for i := range rounds {
		wg.Add(2)
		cl.SendVote(testSelf, &protocol.VoteRequest{Header: protocol.Header{Group: testGroup, RemoteID: testSelf,
			LocalID: "n1", LeaderID: "n1", Term: int64(i)}, LedgerEndIndex: -1, LedgerEndTerm: -1},
			func(_ *protocol.VoteResponse, err error) { count(err) })
		cl.SendHeartBeat(testSelf, hbRequest(int64(i)), func(_ *protocol.HeartBeatResponse, err error) { count(err) })
	}
	waitGroup(t, &wg, "every call")
	if n, st := failed.Load(), cl.Stats(); n != 0 || st.AuthFailures != 0 || s.Stats().AuthFailures != 0 {
		t.Fatalf("%d of %d calls failed (first: %v); auth failures: client %d, server %d", n, 2*rounds, first.Load(), st.AuthFailures, s.Stats().AuthFailures)
	}
	if h.inline.Load() == 0 {
		t.Fatal("no heartbeat was answered on the loop")
	}
}
