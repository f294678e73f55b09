package rpc

// Heartbeats answered on the event loop (docs/protocol.md 4.5, "Where a heartbeat is
// answered"). A worker's answer takes three hand-offs: the loop wakes a worker (a futex), the
// worker hands the frame back through the connection's outbox (a wake-up on the loop's
// eventfd), and the loop wakes to write it. A heartbeat's answer needs none of them when the
// Handler can answer without waiting (InlineHeartBeater): the loop that decoded the request
// answers it and writes the frame with the other answers of that read. A heartbeat that can not be answered that way (its member's lock is held, by
// a vote waiting for its fsync for instance, or the answer needs a durable write first) goes
// to workers of its own, never behind the queue of other requests.

import (
	"github.com/panjf2000/gnet/v2"
)

// hbWorkers is how many workers serve the heartbeats the loop could not answer: as many as
// the ordinary workers up to 32. Each may wait for one member's lock or one durable write (a
// higher term, row 7a), and a host's cold start sends many such heartbeats at once.
func hbWorkers(workers int) int { return min(workers, 32) }

// hbTaskQueue bounds the heartbeats waiting for the heartbeat workers (32 KiB of slots; the
// ordinary queue, up to 128 Ki slots, takes any more).
const hbTaskQueue = 4096

// heartBeatOnLoop serves heartbeat t on the event loop that decoded it (t holds its
// connection's in-flight slot): answered and written here if the Handler can answer at once,
// else queued for the heartbeat workers. It returns gnet.Close if writing the answer failed.
func (s *Server) heartBeatOnLoop(t *task) gnet.Action {
	sc := t.conn
	if s.stopping.Load() {
		s.release(t)
		return gnet.None
	}
	resp, ok := s.inline.TryHandleHeartBeat(&t.hb)
	if !ok {
		// Their queue full, the ordinary workers take it.
		if !s.hbTasks.push(t) && !s.tasks.push(t) {
			s.obs.rpcError(t.code, ReasonOverloaded, sc.remote)
			s.release(t)
		}
		return gnet.None
	}
	s.obs.requests.Add(1)
	act := gnet.None
	fb, err := heartBeatMethod.answerFrame(s, t, resp)
	switch {
	case err != nil:
		s.obs.rpcError(t.code, callErrReason(encodeErr(err)), sc.remote)
	case fb != nil:
		act = s.writeOnLoop(sc, fb)
	}
	s.release(t)
	return act
}

// writeOnLoop queues an answer frame the connection's own event loop made (sealed first if
// the connection has a session) in its outbox, which the loop writes at the end of OnTraffic
// (server_outbox.go), after what was queued before it. It returns gnet.Close if the frame
// could not be sealed or queued.
func (s *Server) writeOnLoop(sc *serverConn, fb *frameBuf) gnet.Action {
	if sc.sess != nil {
		sc.sealMu.Lock()
		defer sc.sealMu.Unlock()
		if err := sealFrame(sc.sess, fb); err != nil {
			putFrameBuf(fb)
			sc.raiseClose(closeRefused)
			s.obs.authFailure(authReason(err), sc.remote, sc.sess.PeerID(), err)
			return gnet.Close
		}
	}
	return s.postOnLoop(sc, fb)
}

// closeQueues closes the queues from the event loops to the workers, once no loop runs.
func (s *Server) closeQueues() {
	s.tasks.close()
	s.hostTasks.close()
	if s.hbTasks != nil {
		s.hbTasks.close()
	}
}
