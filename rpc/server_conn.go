package rpc

// A server connection's life: accepted and bounded in OnOpen, closed by its timers (a frame
// left unfinished, no first frame, idleness) or for a bad frame, and counted once, for the
// reason it closed, in OnClose.

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/secure"
)

// events receives gnet's callbacks. It is separate from Server so that the callbacks are not
// part of Server's exported API. Every callback runs on an event loop and must not block.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

func (e *events) OnBoot(eng gnet.Engine) gnet.Action {
	e.s.engine = eng
	if fd, err := eng.Dup(); err == nil {
		e.s.lnFD = fd
	}
	close(e.s.booted)
	return gnet.None
}

// serverConn is the per-connection state, stored in the gnet connection's context.
type serverConn struct {
	c      gnet.Conn
	remote string
	dec    frameDecoder // used only on the connection's event loop
	// inflight counts this connection's requests that are queued or being handled; parked
	// says the loop stopped reading because inflight hit the limit and waits for a Wake.
	inflight atomic.Int32
	parked   atomic.Bool
	// why is why we closed it (a closeReason), for OnClose to count: the reasons rank, and a
	// stronger one set by another goroutine replaces a weaker one (raiseClose).
	why atomic.Int32
	// partialSince is when the unfinished frame at the head of the buffer was first seen
	// (monoNow), 0 while there is none. stallTimer (event loop only: created, reset and
	// stopped there) then fires frameTimeout later, and stall closes the connection if that
	// frame is still unfinished.
	partialSince atomic.Int64
	stallTimer   *time.Timer
	// ip is the source address counted in perIP. lastFrame is when the connection opened or
	// last completed a frame (monoNow), framed whether it has completed one; idleTimer
	// (created in OnOpen, stopped in OnClose) closes it when idle too long, or when it has
	// not authenticated in time. closed is set by OnClose, so a timer firing late does nothing.
	ip        netip.Addr
	lastFrame atomic.Int64
	framed    atomic.Bool
	idleTimer *time.Timer
	closed    atomic.Bool
	// With Auth.Keys: sess is the connection's session once the handshake is done (set on the
	// event loop before any request of the connection is decoded, so the workers, which get
	// requests through the task queue, see it). framed is set only by the first frame that
	// opens: a replayed msg1 also gets a session, but nothing it sends opens. sealMu holds
	// Seal and posting to the outbox together, so frames go on the wire in the order they were sealed.
	// plain is the event loop's buffer for opened frames.
	sess   *secure.Session
	sealMu sync.Mutex
	plain  []byte
	// outbox holds the answers waiting for the event loop to write them, in the order they
	// were queued (server_outbox.go).
	outbox outbox
	// link: sess is a host link's (handshake version 2), whose PeerID is the dialling
	// host's id; its requests are checked by Mux.linkSender instead of by their localId alone.
	link bool
	// resp (member keys) is the handshake between msg2 and msg3; untrack ends the session's
	// tracking by PeerKeys (event loop only: set by finishStatic, called by OnClose).
	resp    *secure.StaticResponder
	untrack func()
}

// closeReason is why the server closed a connection, ranked: when two are set (a timer
// fires while the event loop refuses a frame), OnClose counts the stronger one only.
type closeReason int32

const (
	closeByPeer   closeReason = iota // not by us: the peer closed, or the server stops
	closeStalled                     // a frame stayed unfinished for frameTimeout: a bad frame
	closeIdle                        // idle past its bound: routine, not counted
	closeUnproven                    // no handshake and first sealed frame in time: an auth failure
	closeRefused                     // a bad frame or an authentication failure, already counted
)

// raiseClose records r as the reason the connection closes unless a stronger one is set.
func (sc *serverConn) raiseClose(r closeReason) {
	for {
		old := sc.why.Load()
		if old >= int32(r) || sc.why.CompareAndSwap(old, int32(r)) {
			return
		}
	}
}

// OnOpen is the one place a connection is accepted: the connection bounds, the socket
// options and the per-connection state are all set up here. With Auth.Keys the peer speaks
// first (msg1, handled in OnTraffic); the first-frame timer bounds how long it may take.
func (e *events) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	remote := c.RemoteAddr().String()
	if s.conns.Add(1) > int64(s.opts.MaxConns) {
		s.obs.logAt(zap.WarnLevel).Warn("rpc: too many connections, closing", zap.String("remote", remote))
		return nil, gnet.Close
	}
	ip := remoteIP(c)
	if !s.addPerIP(ip) {
		s.obs.logAt(zap.WarnLevel).Warn("rpc: too many connections from one address, closing", zap.String("remote", remote),
			zap.Int("maxConnsPerIP", s.opts.MaxConnsPerIP))
		return nil, gnet.Close
	}
	// Best effort: without them a dead peer is found later (sockopt.go). Keep-alive is set per
	// connection rather than with gnet's WithTCPKeepAlive, which (v2.10.0) overwrites the
	// listen error with its own setsockopt error on the failed socket, so Start would no
	// longer report EADDRINUSE.
	_ = c.SetKeepAlive(true, tcpKeepAlive, tcpKeepAlive, tcpKeepAliveCount)
	_ = setUserTimeout(c.Fd(), tcpUserTimeout)
	sc := &serverConn{c: c, remote: remote, ip: ip}
	sc.outbox.flush = func(gnet.Conn, error) error {
		s.woken(sc)
		return nil
	}
	sc.lastFrame.Store(monoNow())
	if first := s.opts.FirstFrameTimeout; first > 0 {
		sc.idleTimer = time.AfterFunc(first, func() { s.idleCheck(sc) })
	} else if s.opts.IdleTimeout > 0 {
		sc.idleTimer = time.AfterFunc(s.opts.IdleTimeout, func() { s.idleCheck(sc) })
	}
	c.SetContext(sc)
	return nil, gnet.None
}

// remoteIP is the connection's source address, IPv4-mapped addresses unmapped, so that one
// host counts as one whichever way it reaches us.
func remoteIP(c gnet.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// addPerIP counts a connection from ip, or refuses it at MaxConnsPerIP.
func (s *Server) addPerIP(ip netip.Addr) bool {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	n := s.perIP[ip]
	if s.opts.MaxConnsPerIP > 0 && n >= s.opts.MaxConnsPerIP {
		return false
	}
	s.perIP[ip] = n + 1
	return true
}

func (s *Server) removePerIP(ip netip.Addr) {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	if n := s.perIP[ip]; n > 1 {
		s.perIP[ip] = n - 1
	} else {
		delete(s.perIP, ip)
	}
}

func (e *events) OnClose(c gnet.Conn, _ error) gnet.Action {
	s := e.s
	s.conns.Add(-1)
	sc, _ := c.Context().(*serverConn)
	if sc == nil {
		return gnet.None
	}
	s.removePerIP(sc.ip)
	sc.closed.Store(true)
	sc.dropOutbox()
	if sc.untrack != nil {
		sc.untrack()
	}
	if sc.stallTimer != nil {
		sc.stallTimer.Stop()
	}
	if sc.idleTimer != nil {
		sc.idleTimer.Stop()
	}
	if s.stopping.Load() {
		return gnet.None
	}
	switch closeReason(sc.why.Load()) {
	case closeRefused, closeIdle: // counted when refused; idleness is routine
		return gnet.None
	case closeUnproven:
		s.obs.authFailure(ReasonHandshakeTimeout, sc.remote, "", errHandshakeTimeout)
		return gnet.None
	case closeStalled:
		s.obs.badFrame(ReasonStalled, sc.remote, errStalled)
		return gnet.None
	}
	// Bytes left over from a connection that was not throttled are the start of a frame the
	// peer never finished. (A throttled connection's leftovers are whole requests we had not
	// read yet; they die with the connection and are not the peer's fault.)
	if !sc.parked.Load() && c.InboundBuffered() > 0 {
		s.obs.badFrame(ReasonTruncated, sc.remote, io.ErrUnexpectedEOF)
	}
	return gnet.None
}

// partialFrame notes that the buffer ends in an unfinished frame and starts that frame's
// clock: fresh says frames were decoded in this OnTraffic, so the leftover bytes are a new
// frame. More bytes of the same frame do not restart the clock, so a peer that trickles a
// frame is closed too.
func (s *Server) partialFrame(sc *serverConn, fresh bool) gnet.Action {
	if fresh || sc.partialSince.Load() == 0 {
		sc.partialSince.Store(monoNow())
		if sc.stallTimer == nil {
			sc.stallTimer = time.AfterFunc(s.opts.frameTimeout, func() { s.stall(sc) })
		} else {
			sc.stallTimer.Reset(s.opts.frameTimeout)
		}
	}
	return gnet.None
}

// noPartialFrame stops the clock: the buffer is empty, or holds whole frames we have not
// read yet.
func (s *Server) noPartialFrame(sc *serverConn) {
	if sc.partialSince.Load() != 0 {
		sc.partialSince.Store(0)
		sc.stallTimer.Stop()
	}
}

// stall runs on the stall timer's goroutine, never on an event loop, which it must not
// block. It closes the connection if its frame is still unfinished after frameTimeout; the
// timer may have been overtaken by the frame completing or a newer one starting. Conn.Close is safe here: in
// gnet v2.10.0 it only queues the close on the connection's loop, which ignores a
// connection that has closed meanwhile. OnClose counts the frame.
func (s *Server) stall(sc *serverConn) {
	since := sc.partialSince.Load()
	if since == 0 || time.Duration(monoNow()-since) < s.opts.frameTimeout {
		return
	}
	sc.raiseClose(closeStalled)
	s.closeConn(sc)
}

// idleCheck runs on the idle timer's goroutine, never on an event loop. It closes the
// connection if it has completed no frame for its idle bound (FirstFrameTimeout before the
// first frame, IdleTimeout after) and nothing of it is in progress: no request queued or in
// a handler, and no unfinished frame (that one is the stall timer's). Otherwise it re-arms
// the timer for when the bound could next be reached, so a busy connection costs the timer
// nothing per frame.
func (s *Server) idleCheck(sc *serverConn) {
	if sc.closed.Load() {
		return
	}
	if !sc.framed.Load() && s.opts.Auth.secure() && s.opts.FirstFrameTimeout > 0 {
		// Not authenticated in time: the timer was armed for exactly FirstFrameTimeout, and a
		// partial frame does not extend it (a peer trickling msg1 is no member).
		sc.raiseClose(closeUnproven)
		s.closeConn(sc)
		return
	}
	limit := s.opts.FirstFrameTimeout
	if sc.framed.Load() {
		limit = s.opts.IdleTimeout
	}
	if limit <= 0 { // this bound is off
		if !sc.framed.Load() && s.opts.IdleTimeout > 0 {
			sc.idleTimer.Reset(s.opts.IdleTimeout) // look again: IdleTimeout applies once framed
		}
		return
	}
	idle := time.Duration(monoNow() - sc.lastFrame.Load())
	if idle < limit || sc.inflight.Load() > 0 || sc.partialSince.Load() != 0 {
		sc.idleTimer.Reset(max(limit-idle, limit/8))
		return
	}
	sc.raiseClose(closeIdle)
	s.opts.Logger.Debug("rpc: closing idle connection", zap.String("remote", sc.remote),
		zap.Duration("idle", idle), zap.Bool("framed", sc.framed.Load()))
	s.closeConn(sc)
}

// closeConn closes a connection from outside its event loop (a timer or a worker).
func (s *Server) closeConn(sc *serverConn) {
	s.loopMu.RLock()
	defer s.loopMu.RUnlock()
	if !s.stopping.Load() {
		_ = sc.c.Close()
	}
}

// monoEpoch makes monoNow monotonic (a wall-clock step can not stall or spare a
// connection) and never 0, which partialSince reserves for "no partial frame".
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }
