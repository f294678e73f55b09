package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// roundTrips records Hooks.OnRoundTrip calls.
type roundTrips struct {
	mu  sync.Mutex
	got []roundTrip
}

type roundTrip struct {
	code, peer string
	d          time.Duration
}

func (r *roundTrips) add(code, peer string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, roundTrip{code, peer, d})
}

func (r *roundTrips) take() []roundTrip {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// TestRoundTripHook: each answered call reports its request code, the peer's id and a round
// trip that covers at least the time the peer's handler held it and at most the time the
// caller waited; a failed call reports nothing.
func TestRoundTripHook(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{}), gateOnly: protocol.RequestHeartBeat}
	srv := startServer(t, h, nil)
	var rts roundTrips
	cl := newClient(t, map[string]string{testSelf: srv.Addr()}, func(o *ClientOptions) { o.OnRoundTrip = rts.add })

	// The handler holds the heartbeat for held; the round trip cannot be shorter.
	const held = 20 * time.Millisecond
	start := time.Now()
	answered := make(chan error, 1)
	cl.SendHeartBeat(testSelf, hbRequest(1), func(_ *protocol.HeartBeatResponse, err error) { answered <- err })
	eventually(t, "heartbeat in the handler", func() bool { return h.active.Load() == 1 })
	time.Sleep(held)
	close(h.gate)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	got := rts.take()
	if len(got) != 1 || got[0].code != "HEART_BEAT" || got[0].peer != testSelf || got[0].d < held || got[0].d > waited {
		t.Fatalf("round trips %v, want one HEART_BEAT to %s of [%v, %v]", got, testSelf, held, waited)
	}

	if _, err := callSync(t, func(done func(*protocol.VoteResponse, error)) {
		cl.SendVote(testSelf, &protocol.VoteRequest{Header: protocol.Header{Group: testGroup, RemoteID: testSelf, LocalID: "n1", Term: 1}}, done)
	}); err != nil {
		t.Fatal(err)
	}
	if got := rts.take(); len(got) != 1 || got[0].code != "VOTE" || got[0].peer != testSelf || got[0].d <= 0 {
		t.Fatalf("round trips %v, want one VOTE to %s", got, testSelf)
	}

	// No answer, no round trip: an unknown peer, and a peer that went away.
	if _, err := heartBeat(t, cl, "nobody", 1); err == nil {
		t.Fatal("heartbeat to an unknown peer succeeded")
	}
	stopServer(t, srv)
	eventually(t, "peer down", func() bool { return !cl.Connected(testSelf) })
	if _, err := heartBeat(t, cl, testSelf, 1); err == nil {
		t.Fatal("heartbeat to a stopped server succeeded")
	}
	if got := rts.take(); len(got) != 0 {
		t.Fatalf("failed calls reported round trips %v", got)
	}
}
