package rpc

// The event loop's side of a connection: framing, the handshake, opening sealed frames and
// decoding requests, and refusing what is bad.

import (
	"errors"
	"fmt"

	"github.com/panjf2000/gnet/v2"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// OnTraffic decodes every complete frame in the buffer and hands each to the workers. gnet
// calls it again only when new bytes arrive, so it must not return while a complete frame is
// buffered, unless the connection is parked (then a finishing request wakes it).
func (e *events) OnTraffic(c gnet.Conn) gnet.Action {
	s := e.s
	sc, ok := c.Context().(*serverConn)
	if !ok { // a connection OnOpen refused; gnet is closing it
		return gnet.Close
	}
	act := s.traffic(c, sc)
	if act != gnet.None {
		// A bad frame, or an answer that could not be queued: the connection closes, but
		// the answers made to the frames before it are written first (gnet sends what a
		// connection's buffer holds before it closes it). Dropped with the outbox, a
		// heartbeat answered on the loop was lost to its leader, which had written it
		// before answers were batched (server_outbox.go).
		_ = s.flushOutbox(sc, false)
		return act
	}
	return s.flushOutbox(sc, false) // the answers made on the loop (server_outbox.go)
}

// traffic is OnTraffic but for the write of the answers it queued.
func (s *Server) traffic(c gnet.Conn, sc *serverConn) gnet.Action {
	// decoded: a frame was decoded in this call (every pass that does not return decodes one).
	for decoded := false; ; decoded = true {
		if parked, act := s.throttle(c, sc); parked {
			return act
		}
		n, act, whole := s.nextFrame(c, sc, decoded)
		if !whole {
			return act
		}
		if act := s.frame(c, sc, n); act != gnet.None {
			return act
		}
	}
}

// throttle stops decoding while the connection has MaxInflightPerConn requests queued or in a
// Handler (parked: OnTraffic returns act), and closes it if it floods us meanwhile.
func (s *Server) throttle(c gnet.Conn, sc *serverConn) (parked bool, act gnet.Action) {
	limit := int32(s.opts.MaxInflightPerConn)
	if sc.inflight.Load() < limit {
		return false, gnet.None
	}
	if c.InboundBuffered() > s.maxBuffered {
		return true, s.reject(sc, errFlood)
	}
	// Publish parked before re-reading inflight; release decrements inflight before
	// reading parked. One of the two sees the other, so no wake-up is lost.
	sc.parked.Store(true)
	if sc.inflight.Load() >= limit {
		s.noPartialFrame(sc) // what waits is ours to read, not the peer's to finish
		return true, gnet.None
	}
	sc.parked.Store(false)
	return false, gnet.None
}

// nextFrame returns the body length of the frame at the head of the buffer if all of it is
// there (whole); otherwise OnTraffic returns act: wait for more bytes, or close for a length
// header beyond the bound. decoded says frames were decoded before in this OnTraffic.
func (s *Server) nextFrame(c gnet.Conn, sc *serverConn, decoded bool) (n int, act gnet.Action, whole bool) {
	buffered := c.InboundBuffered()
	if buffered == 0 {
		s.noPartialFrame(sc)
		return 0, gnet.None, false
	}
	if buffered < frameHeaderLen {
		return 0, s.partialFrame(sc, decoded), false
	}
	hdr, _ := c.Peek(frameHeaderLen)
	handshake := s.handshaking(sc)
	limit := s.maxBody
	if handshake {
		limit = secure.MaxHandshakeLen // msg1 is bounded before it is buffered
	}
	n, err := frameLength(hdr, limit)
	switch {
	case err != nil && handshake:
		return 0, s.refuseHandshake(c, sc, err), false
	case err != nil:
		return 0, s.reject(sc, err), false
	case buffered < frameHeaderLen+n:
		return 0, s.partialFrame(sc, decoded), false // wait for more bytes
	}
	return n, gnet.None, true
}

// handshaking says the connection's next frame is the handshake's msg1.
func (s *Server) handshaking(sc *serverConn) bool { return s.opts.Auth.secure() && sc.sess == nil }

// frame consumes the whole frame at the head of the buffer, whose body is n bytes: the
// handshake's msg1, or a request, opened if sealed, decoded and handed to the workers. It
// returns gnet.None to go on, or gnet.Close.
func (s *Server) frame(c gnet.Conn, sc *serverConn, n int) gnet.Action {
	frame, _ := c.Peek(frameHeaderLen + n)
	body := frame[frameHeaderLen:]
	if s.handshaking(sc) {
		var err error
		if sc.resp != nil {
			err = s.finishStatic(sc, body) // msg3 of the member-key handshake
		} else {
			err = s.respond(c, sc, body)
		}
		_, _ = c.Discard(frameHeaderLen + n)
		if err != nil {
			return s.refuse(sc, "", err)
		}
		return gnet.None
	}
	if sc.sess != nil {
		// Opened into our own buffer: the slice from Peek may be gnet's ring buffer.
		plain, err := sc.sess.Open(sc.plain[:0], body)
		_, _ = c.Discard(frameHeaderLen + n)
		if err != nil {
			return s.refuse(sc, sc.sess.PeerID(), err)
		}
		body, sc.plain = plain, plain
	}
	t := s.taskPool.Get().(*task)
	err := sc.dec.decodeRequest(body, &t.request)
	if sc.sess == nil {
		_, _ = c.Discard(frameHeaderLen + n)
	} else if cap(sc.plain) > frameBufKeep {
		sc.plain = nil // a rare large frame: do not pin its buffer
	}
	if err != nil {
		s.taskPool.Put(t)
		return s.reject(sc, err)
	}
	return s.dispatch(sc, t)
}

// dispatch hands a decoded request to the workers; with a session, only if it comes from the
// member the connection authenticated as.
func (s *Server) dispatch(sc *serverConn, t *task) gnet.Action {
	if sc.sess != nil {
		h := t.m.header(&t.request)
		ok := h.LocalID == sc.sess.PeerID()
		switch {
		case sc.link:
			ok = s.mux.linkSender(h, sc.sess.PeerID())
		case t.code == protocol.RequestHostHeartBeat:
			ok = false // a member's session speaks for a member, never for a host
		}
		if !ok {
			s.taskPool.Put(t)
			return s.refuse(sc, sc.sess.PeerID(), fmt.Errorf("%w: %q sent a request as %q", errWrongMember, sc.sess.PeerID(), h.LocalID))
		}
	}
	sc.lastFrame.Store(monoNow())
	if !sc.framed.Load() {
		sc.framed.Store(true)
	}
	t.conn = sc
	sc.inflight.Add(1)
	if t.code == protocol.RequestHeartBeat && s.inline != nil {
		return s.heartBeatOnLoop(t) // server_inline.go
	}
	q := s.tasks
	if t.code == protocol.RequestHostHeartBeat {
		q = s.hostTasks // not behind the groups' requests (server_work.go)
	}
	if !q.push(t) {
		s.obs.rpcError(t.code, ReasonOverloaded, sc.remote)
		s.release(t)
	}
	return gnet.None
}

var (
	errFlood            = errors.New("rpc: peer kept sending while throttled")
	errStalled          = errors.New("rpc: peer left a frame unfinished for too long")
	errHandshakeTimeout = errors.New("rpc: no handshake and first sealed frame within FirstFrameTimeout")
)

// respond runs the responder's side of the handshake on msg1, the connection's first frame
// body, and writes msg2 back. It runs on the event loop: one key generation and one DH
// (about 0.1-0.3 ms), and much less to refuse a stranger, whose connections MaxConnsPerIP
// bounds.
func (s *Server) respond(c gnet.Conn, sc *serverConn, msg1 []byte) error {
	a := &s.opts.Auth
	if a.PeerKeys != nil {
		return s.respondStatic(c, sc, msg1)
	}
	var msg2 []byte
	var sess *secure.Session
	var peerID string
	var err error
	switch {
	case s.mux != nil && secure.MsgVersion(msg1) == secure.VersionLink:
		msg2, sess, peerID, err = s.mux.respondLink(a.Keys, msg1)
		sc.link = err == nil
	case s.mux != nil:
		msg2, sess, _, peerID, _, err = s.mux.respond(a.Keys, msg1)
	default:
		msg2, sess, peerID, err = secure.Respond(a.Keys, a.Group, a.SelfID, msg1, s.accept)
	}
	if err != nil {
		if peerID != "" {
			err = fmt.Errorf("%w (claimed id %q)", err, peerID)
		}
		return err
	}
	sc.sess = sess
	_, err = c.Write(appendFrame(make([]byte, 0, frameHeaderLen+len(msg2)), msg2))
	return err
}

// respondStatic reads msg1 of the member-key handshake and answers msg2; msg3 follows
// (finishStatic). A dialler of another group, or that dialled another member, or that is no
// member, is refused before any Diffie-Hellman. On a Mux, msg1 names the group (one lookup,
// whatever the groups served) or, with no group, is a host link (Mux.checkStatic).
func (s *Server) respondStatic(c gnet.Conn, sc *serverConn, msg1 []byte) error {
	a := &s.opts.Auth
	check := func(group, peer, target string) error {
		switch {
		case group != a.Group:
			return fmt.Errorf("%w: %q of group %q dialled %q of group %q", secure.ErrWrongPeer, peer, group, target, a.Group)
		case target != a.SelfID:
			return fmt.Errorf("%w: %q dialled %q, this is %q", secure.ErrWrongPeer, peer, target, a.SelfID)
		case !s.accept(peer):
			return fmt.Errorf("%w: %q", secure.ErrUnknownMember, peer)
		}
		return nil
	}
	if s.mux != nil {
		check = s.mux.checkStatic
	}
	r, msg2, group, peer, _, err := secure.RespondStatic(a.PeerKeys.Identity(), msg1, check)
	if err != nil {
		if peer != "" {
			err = fmt.Errorf("%w (claimed id %q)", err, peer)
		}
		return err
	}
	sc.resp, sc.link = r, s.mux != nil && group == "" // a host link: no group
	_, err = c.Write(appendFrame(make([]byte, 0, frameHeaderLen+len(msg2)), msg2))
	return err
}

// finishStatic reads msg3: the dialler proves its static key, which the trust list must
// list under the id it claimed. The session is then tracked until the connection closes, so
// a reload that revokes its key closes it (PeerKeys.Reload).
func (s *Server) finishStatic(sc *serverConn, msg3 []byte) error {
	r := sc.resp
	sc.resp = nil
	sess, err := r.Finish(msg3)
	if err != nil {
		return fmt.Errorf("%w (claimed id %q)", err, r.Peer())
	}
	peer := sess.PeerID()
	untrack, err := s.opts.Auth.PeerKeys.track(peer, sess.PeerKey(), func(err error) {
		sc.raiseClose(closeRefused)
		s.obs.authFailure(authReason(err), sc.remote, peer, fmt.Errorf("closed at a reload: %w", err))
		s.closeConn(sc)
	})
	if err != nil {
		return err
	}
	sc.untrack, sc.sess = untrack, sess
	return nil
}

// refuseHandshake refuses a first frame longer than any msg1: a plaintext request (a member
// without a key) if its length is one an rpc frame may have and its body starts as an rpc
// envelope does, else a malformed handshake. The first byte alone called one random input in
// 14 plaintext, sending operators to check keys for what was a scanner.
func (s *Server) refuseHandshake(c gnet.Conn, sc *serverConn, err error) gnet.Action {
	if b, _ := c.Peek(frameHeaderLen + 1); len(b) > frameHeaderLen && isArray(b[frameHeaderLen]) {
		if _, lerr := frameLength(b, s.opts.MaxFrameSize); lerr == nil {
			return s.refuse(sc, "", secure.ErrPlaintext)
		}
	}
	return s.refuse(sc, "", fmt.Errorf("%w: %v", secure.ErrMalformed, err))
}

// refuse counts and logs an authentication failure; the caller returns gnet.Close.
func (s *Server) refuse(sc *serverConn, peerID string, err error) gnet.Action {
	sc.raiseClose(closeRefused)
	s.obs.authFailure(authReason(err), sc.remote, peerID, err)
	return gnet.Close
}

// reject counts and logs a bad frame; the caller returns gnet.Close.
func (s *Server) reject(sc *serverConn, err error) gnet.Action {
	sc.raiseClose(closeRefused)
	reason := badFrameReason(err)
	if errors.Is(err, errFlood) {
		reason = ReasonFlood
	}
	s.obs.badFrame(reason, sc.remote, err)
	return gnet.Close
}
