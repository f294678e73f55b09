package rpc

// The workers' side: a decoded request goes through its method table entry (method.go) to the
// Handler, and the answer back to the connection.

import (
	"errors"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// task is a decoded request travelling from an event loop to a worker.
type task struct {
	request
	conn *serverConn
}

// Host heartbeats have a lane of one worker (hostTasks), since a host heartbeat's handler
// only takes the liveness table's lock.

// hostTaskQueue bounds the host heartbeats waiting for their worker: a few per peer host.
const hostTaskQueue = 1024

// serve runs one request through its entry in the method table (method.go), which sends the
// answer and releases the task.
func (s *Server) serve(t *task) {
	if s.stopping.Load() {
		s.release(t) // the connection is closing anyway; do not run the handler
		return
	}
	s.obs.requests.Add(1)
	t.m.serve(s, t)
}

// An answer that refuses a request for another group (UNKNOWN_GROUP) goes out as the code
// alone, whatever else the Handler filled in: a host outside the group learns nothing about
// it (no ids, addresses, term, role or ledger). Issue 18: METADATA was answered in full.
var refusedHeader = protocol.Header{Code: protocol.CodeUnknownGroup}

func foreign(h *protocol.Header) bool { return h.Code == protocol.CodeUnknownGroup }

// sendReply queues the encoded frame (or counts the encoding failure) in the connection's
// outbox, which its event loop writes (server_outbox.go) and then recycles the buffer.
// Once Stop has begun the reply is dropped, as queued requests are: the connection is
// closing, and the engine's loops may be gone (see loopMu).
func (s *Server) sendReply(t *task, fb *frameBuf, err error) {
	if err != nil {
		s.obs.rpcError(t.code, callErrReason(encodeErr(err)), t.conn.remote)
		return
	}
	if sc := t.conn; sc.sess != nil {
		// Frames must reach the wire in the order they were sealed (the peer's counter).
		sc.sealMu.Lock()
		defer sc.sealMu.Unlock()
		if err := sealFrame(sc.sess, fb); err != nil {
			putFrameBuf(fb)
			s.obs.authFailure(authReason(err), sc.remote, sc.sess.PeerID(), err)
			s.closeConn(sc)
			return
		}
	}
	s.loopMu.RLock()
	stopping := s.stopping.Load()
	if !stopping {
		err = s.postFromWorker(t.conn, fb)
	}
	s.loopMu.RUnlock()
	closed := errors.Is(err, errConnClosed)
	if stopping || closed {
		putFrameBuf(fb) // not queued (a failed wake-up leaves it queued, for OnClose)
	}
	if err != nil && !closed { // an answer to a connection that closed meanwhile is no failure to count
		s.obs.rpcError(t.code, ReasonWrite, t.conn.remote)
	}
}

// release frees the request's in-flight slot, wakes its connection if it was parked on that
// limit, and recycles the task (except a leadership transfer's: the handler may keep it).
func (s *Server) release(t *task) {
	sc := t.conn
	if sc.inflight.Add(-1) < int32(s.opts.MaxInflightPerConn) && sc.parked.CompareAndSwap(true, false) {
		s.loopMu.RLock()
		if !s.stopping.Load() {
			_ = sc.c.Wake(nil) // runs OnTraffic on the loop, which reads the frames left waiting
		}
		s.loopMu.RUnlock()
	}
	if !t.m.keepsTask() {
		t.conn = nil
		s.taskPool.Put(t)
	}
}
