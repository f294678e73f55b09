package rpc

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestClientBackoff: a peer that accepts connections and drops them at once is redialled
// with a growing delay, as if it refused them, not every ReconnectMin forever; a connection
// that carried an answer starts the backoff over, so a peer that restarts is found again
// at once. The bounds are generous: each is many times what the correct client needs, and
// what a broken one does is on the far side of it whatever the machine's load.
func TestClientBackoff(t *testing.T) {
	const (
		minDelay = 20 * time.Millisecond
		drops    = 7 // connections dropped before one is served
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan time.Time, 64)
	closedAt := make(chan time.Time, 1)
	go func() {
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- time.Now()
			if i == drops {
				serveOneHeartBeat(conn)
				closedAt <- time.Now()
			}
			conn.Close()
		}
	}()
	cl, err := NewClient(ClientOptions{Peers: map[string]string{"p": ln.Addr().String()}, Auth: insecure,
		Logger: zaptest.NewLogger(t), ReconnectMin: minDelay, ReconnectMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := func() time.Time {
		t.Helper()
		select {
		case at := <-accepted:
			return at
		case <-time.After(waitTimeout):
			t.Fatal("no connection attempt")
			return time.Time{}
		}
	}

	var times []time.Time
	for i := 0; i < drops; i++ {
		times = append(times, next())
	}
	// After six drops the delay is in [16, 32] x minDelay; resetting on every successful
	// dial would keep it within minDelay.
	if gap := times[drops-1].Sub(times[drops-2]); gap < 5*minDelay {
		t.Fatalf("redialled %v after the 6th dropped connection: the backoff does not grow", gap)
	}

	next() // the connection that is served
	eventually(t, "the client to be connected", func() bool { return cl.Connected("p") })
	if _, err := heartBeat(t, cl, "p", 1); err != nil {
		t.Fatal(err)
	}
	closed := <-closedAt
	// Without the reset the next attempt would come after half the grown backoff, over 1 s.
	if gap := next().Sub(closed); gap > time.Second {
		t.Fatalf("redialled %v after an answered connection closed: the backoff did not start over", gap)
	}
}

// serveOneHeartBeat answers one heartbeat request on conn.
func serveOneHeartBeat(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	req, ok := readRequest(conn)
	if !ok {
		return
	}
	_, _ = conn.Write(frameOf(hbRespCase, req.id, &protocol.HeartBeatResponse{
		Header: protocol.Header{Code: protocol.CodeSuccess}}))
}

// budgetConn is a net.Conn whose writes take virtual time, so deadlines can be tested
// without sleeping: each Write costs cost, and fails as a real deadline would once the
// writes since the last SetWriteDeadline cost more than that deadline allowed.
type budgetConn struct {
	net.Conn      // nil; only the methods below are called
	cost          time.Duration
	budget, spent time.Duration
	writes        int
	written       bytes.Buffer
	onWrite       func()
}

func (c *budgetConn) SetWriteDeadline(t time.Time) error {
	c.budget, c.spent = time.Until(t), 0
	return nil
}

func (c *budgetConn) Write(b []byte) (int, error) {
	c.writes++
	if c.writes > 100 {
		return 0, errors.New("runaway batch: the writer never stops draining the queue")
	}
	if c.spent += c.cost; c.spent > c.budget {
		return 0, os.ErrDeadlineExceeded
	}
	if c.onWrite != nil {
		c.onWrite()
	}
	return c.written.Write(b)
}

// TestWriterUnderSteadyStream: while callers keep the send queue full, a healthy connection
// (each socket write well within CallTimeout) is not cut off because a whole batch took
// longer than one deadline, and a batch ends after the frames queued when it began, so the
// writer goroutine gets back to expiring calls.
func TestWriterUnderSteadyStream(t *testing.T) {
	const timeout = time.Second
	frame := frameOf(metaRespCase, 1, &protocol.MetadataResponse{Peers: strings.Repeat("x", 1000)})
	p := &peer{sendq: sendQueue{limit: 64, sig: make(chan struct{}, 1)}}
	queue := func(n int) {
		for i := 0; i < n; i++ {
			fb := getFrameBuf()
			fb.b = append(fb.b[:0], frame...)
			if !p.sendq.put(outFrame{gen: 1, fb: fb}) {
				putFrameBuf(fb)
			}
		}
	}
	const batch = 48 // about 50 KB: three full 16 KiB socket writes and a last one
	queue(batch)
	// Each socket write takes 0.4 of the deadline, and meanwhile callers queue more frames
	// than the write carried (a 16 KiB write holds 15 of them).
	conn := &budgetConn{cost: timeout * 4 / 10, onWrite: func() { queue(20) }}
	w := newConnWriter(conn, conn, timeout)
	if err := p.writeQueued(w, nil, 1); err != nil {
		t.Fatalf("healthy connection failed after %d socket writes: %v", conn.writes, err)
	}
	if got := conn.written.Len(); got != batch*len(frame) {
		t.Fatalf("wrote %d bytes, want the %d frames queued when the batch began (%d bytes)",
			got, batch, batch*len(frame))
	}
	if n := len(p.sendq.take()); n != 64 {
		t.Fatalf("%d frames queued meanwhile, want the queue's 64", n)
	}
}

// Issue 29: a peer's send queue holds what a burst queues, up to its limit, signals the writer
// once however many frames wait, and lets the burst's buffer go once drained (a host link's
// was a channel of 32 Ki frames, 512 KiB, resident once its ring had moved along).
func TestSendQueueGrowsAndShrinks(t *testing.T) {
	q := sendQueue{limit: 4096, sig: make(chan struct{}, 1)}
	for i := 0; i < 4096; i++ {
		if !q.put(outFrame{gen: 1, fb: getFrameBuf()}) {
			t.Fatalf("put %d refused", i)
		}
	}
	if q.put(outFrame{gen: 1, fb: getFrameBuf()}) {
		t.Fatal("a full queue took a frame")
	}
	if len(q.sig) != 1 {
		t.Fatalf("%d tokens, want 1", len(q.sig))
	}
	<-q.sig
	batch := q.take()
	if len(batch) != 4096 {
		t.Fatalf("took %d frames, want 4096", len(batch))
	}
	for _, f := range batch {
		putFrameBuf(f.fb)
	}
	q.giveBack(batch)
	if q.put(outFrame{gen: 1, fb: getFrameBuf()}); len(q.sig) != 1 || cap(q.q) > sendQueueKeep {
		t.Fatalf("after the burst: %d tokens, buffer of cap %d (keep %d)", len(q.sig), cap(q.q), sendQueueKeep)
	}
	q.drop()
	if len(q.take()) != 0 {
		t.Fatal("drop left frames")
	}
}
