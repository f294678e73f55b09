package rpc

// A connection's answers are written in batches (issue 29). Each answer used to be its own
// write(2): a worker's through AsyncWrite (one task on the loop's queue and one write per
// answer), a heartbeat answered on the loop at once. A host's mass election answers thousands
// of requests of one connection within milliseconds, so those writes were a tenth of a
// surviving host's system time in a crash. Now every answer goes into the connection's
// outbox, in the order it was queued (sealed, on a sealed connection); the event loop writes
// what the outbox holds with one write: at the end of each OnTraffic (the answers it made
// itself) and when a worker's wake-up runs (one wake-up queued at a time, however many answers
// the workers add meanwhile).

import (
	"errors"
	"sync"

	"github.com/panjf2000/gnet/v2"
)

// outboxFlushAt is how many answers the event loop lets its outbox hold while it decodes
// more frames of the same read before it writes them: a read of 64 KiB holds ~800 heartbeats,
// and the first answer should not wait for the last to be decoded.
const outboxFlushAt = 256

// wbufKeep is the largest write buffer a connection keeps between batches.
const wbufKeep = 64 << 10

var errConnClosed = errors.New("rpc: connection closed")

// outbox is a connection's answers waiting for its event loop. mu guards out and woken; the
// rest belongs to the loop.
type outbox struct {
	mu    sync.Mutex
	out   []*frameBuf
	woken bool // a wake-up that flushes the outbox is queued on the loop
	spare []*frameBuf
	wbuf  []byte
	flush gnet.AsyncCallback // the wake-up's callback, bound once per connection
}

// post adds fb to sc's outbox (on a sealed connection with sealMu held, so the order is the
// sealing order) and returns how many answers it holds and whether the caller must wake the
// loop to write them (a worker's answer; the loop writes its own at the end of OnTraffic).
func (sc *serverConn) post(fb *frameBuf, worker bool) (n int, wake bool, err error) {
	o := &sc.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	if sc.closed.Load() { // OnClose emptied the outbox already
		return 0, false, errConnClosed
	}
	o.out = append(o.out, fb)
	if worker && !o.woken {
		o.woken, wake = true, true
	}
	return len(o.out), wake, nil
}

// postFromWorker queues a worker's answer and, if no wake-up is queued yet, wakes the loop to
// write the outbox. Called with loopMu held for reading and the server not stopping.
func (s *Server) postFromWorker(sc *serverConn, fb *frameBuf) error {
	_, wake, err := sc.post(fb, true)
	if err != nil || !wake {
		return err
	}
	if err := sc.c.Wake(sc.outbox.flush); err != nil {
		// The loop could not be woken: the answers stay in the outbox, for the next
		// wake-up, the loop's next OnTraffic, OnClose, or the GC.
		sc.outbox.mu.Lock()
		sc.outbox.woken = false
		sc.outbox.mu.Unlock()
		return err
	}
	return nil
}

// postOnLoop queues an answer the event loop made itself; the loop writes the outbox at the
// end of OnTraffic, or now if it holds outboxFlushAt answers.
func (s *Server) postOnLoop(sc *serverConn, fb *frameBuf) gnet.Action {
	n, _, err := sc.post(fb, false)
	if err != nil {
		putFrameBuf(fb)
		return gnet.Close
	}
	if n >= outboxFlushAt {
		return s.flushOutbox(sc, false)
	}
	return gnet.None
}

// woken is the outbox's wake-up callback, on the loop: OnTraffic has run (and written what
// the loop queued); write what the workers queued since.
func (s *Server) woken(sc *serverConn) {
	if s.flushOutbox(sc, true) == gnet.Close {
		_ = sc.c.Close() // gnet closed it already if the write failed; this is a no-op then
	}
}

// flushOutbox writes every answer in sc's outbox with one write, on the loop, and recycles
// them; woken: called by the wake-up, whose flag it clears first, so an answer queued after
// this takes the batch queues a new wake-up. It returns gnet.Close if the write failed.
func (s *Server) flushOutbox(sc *serverConn, woken bool) gnet.Action {
	o := &sc.outbox
	o.mu.Lock()
	if woken {
		o.woken = false
	}
	batch := o.out
	if len(batch) == 0 {
		o.mu.Unlock()
		return gnet.None
	}
	o.out, o.spare = o.spare[:0], nil
	o.mu.Unlock()
	if sc.closed.Load() { // a wake-up that ran after OnClose
		recycle(batch)
		return gnet.None
	}
	w := o.wbuf[:0]
	for _, fb := range batch {
		w = append(w, fb.b...)
	}
	recycle(batch)
	o.mu.Lock()
	if o.spare == nil && cap(batch) <= outboxFlushAt*4 {
		o.spare = batch[:0]
	}
	o.mu.Unlock()
	_, err := sc.c.Write(w) // gnet keeps what the socket does not take; it closes the connection on an error
	if cap(w) <= wbufKeep {
		o.wbuf = w[:0]
	} else {
		o.wbuf = nil
	}
	if err != nil {
		// Counted as a closed connection (OnClose), as a failed AsyncWrite was: the batch's
		// answers are of several requests.
		return gnet.Close
	}
	return gnet.None
}

// dropOutbox recycles what the outbox holds when the connection closes (OnClose, on the loop,
// after closed is set: post refuses from then on).
func (sc *serverConn) dropOutbox() {
	o := &sc.outbox
	o.mu.Lock()
	batch := o.out
	o.out, o.spare = nil, nil
	o.mu.Unlock()
	recycle(batch)
}

func recycle(batch []*frameBuf) {
	for i, fb := range batch {
		putFrameBuf(fb)
		batch[i] = nil
	}
}
