package rpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// outboxConn is the gnet connection as the outbox sees it: it records the writes and the
// wake-ups queued (run by the test, as the loop would).
type outboxConn struct {
	gnet.Conn
	writes [][]byte
	wakes  []gnet.AsyncCallback
}

func (c *outboxConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

func (c *outboxConn) Wake(cb gnet.AsyncCallback) error {
	c.wakes = append(c.wakes, cb)
	return nil
}

func (c *outboxConn) runWakes() {
	w := c.wakes
	c.wakes = nil
	for _, cb := range w {
		_ = cb(c, nil)
	}
}

func frameOfBytes(b ...byte) *frameBuf {
	fb := getFrameBuf()
	fb.b = append(fb.b[:0], b...)
	return fb
}

// Issue 29: a host answered each request with a write of its own (AsyncWrite per worker answer,
// a write per heartbeat answered on the loop). The answers of one connection queued while its
// loop is busy now go out in one write, in the order they were queued, behind one wake-up of
// the loop; the loop's own answers need no wake-up.
func TestOutboxWritesABatchInOneWrite(t *testing.T) {
	s := &Server{obs: newObserver(zap.NewNop(), Hooks{})}
	c := &outboxConn{}
	sc := &serverConn{c: c}
	sc.outbox.flush = func(gnet.Conn, error) error { s.woken(sc); return nil }

	for i := byte(1); i <= 3; i++ {
		if err := s.postFromWorker(sc, frameOfBytes(i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.wakes) != 1 || len(c.writes) != 0 {
		t.Fatalf("3 answers of workers: %d wake-ups, %d writes; want 1 and 0", len(c.wakes), len(c.writes))
	}
	c.runWakes()
	if len(c.writes) != 1 || !bytes.Equal(c.writes[0], []byte{1, 1, 2, 2, 3, 3}) {
		t.Fatalf("writes %v, want one of the three answers in order", c.writes)
	}
	// The loop's own answers: no wake-up, written by the flush at the end of OnTraffic, in
	// one write with a worker's answer queued meanwhile, which does wake the loop.
	if act := s.postOnLoop(sc, frameOfBytes(4)); act != gnet.None {
		t.Fatal(act)
	}
	if err := s.postFromWorker(sc, frameOfBytes(5)); err != nil {
		t.Fatal(err)
	}
	if len(c.wakes) != 1 {
		t.Fatalf("%d wake-ups for a worker's answer after the loop's, want 1", len(c.wakes))
	}
	s.flushOutbox(sc, false)
	c.runWakes() // finds nothing left to write
	if len(c.writes) != 2 || !bytes.Equal(c.writes[1], []byte{4, 5}) {
		t.Fatalf("writes %v, want a second one of 4 and 5", c.writes)
	}
	// A wake-up has run: the next worker's answer queues a new one.
	if err := s.postFromWorker(sc, frameOfBytes(6)); err != nil || len(c.wakes) != 1 {
		t.Fatalf("after a wake-up ran: %v, %d wake-ups queued, want 1", err, len(c.wakes))
	}
	// Closed: what waits is dropped, and nothing more is taken.
	sc.closed.Store(true)
	sc.dropOutbox()
	c.runWakes()
	if err := s.postFromWorker(sc, frameOfBytes(7)); !errors.Is(err, errConnClosed) || len(c.writes) != 2 {
		t.Fatalf("closed: %v, %d writes; want errConnClosed and no write", err, len(c.writes))
	}
}

// The loop writes its own answers before the end of a long read once outboxFlushAt are queued.
func TestOutboxFlushesALongReadEarly(t *testing.T) {
	s := &Server{obs: newObserver(zap.NewNop(), Hooks{})}
	c := &outboxConn{}
	sc := &serverConn{c: c}
	for i := 0; i < outboxFlushAt; i++ {
		s.postOnLoop(sc, frameOfBytes(byte(i)))
	}
	if len(c.writes) != 1 || len(c.writes[0]) != outboxFlushAt || len(c.wakes) != 0 {
		t.Fatalf("%d writes (%v), %d wake-ups; want one write of %d answers", len(c.writes), c.writes, len(c.wakes), outboxFlushAt)
	}
}

// A read that ends in a bad frame closes the connection, but the answers the loop made to
// the good frames before it in the same read are written first: dropped with the outbox
// (OnClose), they were lost to the peer, which got them before the answers were batched (a
// heartbeat answered on the loop was its own write then).
func TestAnswersBeforeABadFrameAreWrittenBeforeTheClose(t *testing.T) {
	h := &inlineHandler{fakeHandler: &fakeHandler{}}
	s := startServer(t, h, nil)
	conn := dialRaw(t, s.Addr())
	// One write, so that one read takes the two heartbeats and the bad frame after them.
	send := append(frameOf(hbReqCase, 1, hbRequest(1)), frameOf(hbReqCase, 2, hbRequest(2))...)
	send = append(send, frameWith([]byte{0xdd, 0x7f, 0xff, 0xff, 0xff})...) // malformed
	if _, err := conn.Write(send); err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 2; want++ {
		body, err := readFrame(conn)
		if err != nil {
			t.Fatalf("answer %d of 2 before the close: %v (%d answered inline)", want, err, h.inline.Load())
		}
		var c frameDecoder
		var resp response
		if err := c.decodeResponse(body, &resp); err != nil || resp.id != want || resp.hb.Code != protocol.CodeSuccess {
			t.Fatalf("answer %+v (id %d), %v; want id %d, success", resp.hb, resp.id, err, want)
		}
	}
	if n, err := conn.Read(make([]byte, 64)); err == nil || isTimeout(err) {
		t.Fatalf("connection not closed after the bad frame: read %d bytes, %v", n, err)
	}
}
