package rpc

// Keeping a connection to each peer: dialling, the handshake, and redialling with backoff.

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/secure"
)

// run keeps a connection to the peer until Close, redialling with backoff. The backoff
// starts over only after a healthy connection (see serve), which is redialled at once: a
// peer that accepts connections and drops them at once is redialled as slowly as one that
// refuses them.
func (p *peer) run() {
	defer p.cl.wg.Done()
	defer p.dropSpare()
	backoff := p.cl.opts.ReconnectMin
	closedByPeer, resets := false, 0
	for {
		conn, sess, err := p.nextConn()
		if closedByPeer && p.cl.ctx.Err() == nil && p.redialAtOnce(err, &resets) {
			continue // ask again at once: the next dial is refused if the process is gone
		}
		closedByPeer, resets = false, 0
		healthy, silentNet := false, false
		if err == nil {
			healthy, closedByPeer = p.serve(conn, sess)
		} else {
			silentNet = p.dialFailed(err)
		}
		if healthy {
			// Redial at once: the peer closed an idle connection (Server.IdleTimeout), or went
			// away after serving us; a call made before the new connection is up fails with
			// ErrPeerDown, so the gap should be a dial, not a back-off.
			backoff = p.cl.opts.ReconnectMin
			if p.cl.ctx.Err() != nil {
				return
			}
			continue
		}
		var ok bool
		if backoff, ok = p.backOff(backoff, silentNet); !ok {
			return
		}
	}
}

// redialAtOnce judges the dial made right after the peer closed our connection (err is its
// outcome): true to dial again at once (the peer's port was caught closing; at most
// maxClosingResets times in a row, counted in resets). A refused dial reports the peer gone.
func (p *peer) redialAtOnce(err error, resets *int) bool {
	switch redialVerdict(err) {
	case peerClosing:
		if *resets < maxClosingResets {
			*resets++
			return true
		}
	case peerGone:
		if p.cl.opts.OnPeerGone != nil {
			p.cl.obs.logAt(zap.DebugLevel).Debug("rpc: peer gone (connection closed, redial refused)", zap.String("peer", p.id))
			p.cl.opts.OnPeerGone(p.id)
		}
	}
	return false
}

// dialFailed counts or logs a failed dial (unless the client is closing) and reports whether
// it timed out: nothing answered, the network between us is down.
func (p *peer) dialFailed(err error) (silentNet bool) {
	if p.cl.ctx.Err() != nil {
		return false
	}
	var ne net.Error
	var he *handshakeError
	silentNet = errors.As(err, &ne) && ne.Timeout()
	if errors.As(err, &he) {
		p.cl.obs.authFailure(authReason(he.err), p.addr, p.id, he.err)
	} else {
		p.cl.obs.logAt(zap.DebugLevel).Debug("rpc: dial failed", zap.String("peer", p.id), zap.Error(err))
	}
	return silentNet
}

// backOff waits before the next dial: about backoff, or ReconnectMin after a dial that timed
// out (silentNet), less if the peer is kicked (Kick). It returns the next backoff, doubled
// unless the dial timed out or a kick cut the wait, and false once the client closes.
func (p *peer) backOff(backoff time.Duration, silentNet bool) (time.Duration, bool) {
	opts := &p.cl.opts
	wait := backoff
	if silentNet {
		wait = opts.ReconnectMin
	}
	// Jitter keeps members that lost the same peer from redialling in lockstep.
	wait = wait/2 + rand.N(wait/2+1)
	t := time.NewTimer(wait)
	select {
	case <-p.cl.ctx.Done():
		t.Stop()
		return backoff, false
	case <-p.kick: // the peer connected to us: it is up, dial now (Kick)
		t.Stop()
		return opts.ReconnectMin, true
	case <-t.C:
	}
	if !silentNet {
		backoff = min(2*backoff, opts.ReconnectMax)
	}
	return backoff, true
}

// What a redial made right after the peer closed our connection says about its process.
const (
	peerMayLive = iota // connected, timed out, or failed otherwise: nothing known
	peerGone           // refused: nothing listens on its port, the process is not running
	peerClosing        // reset: the port was still closing (see redialVerdict)
)

// maxClosingResets bounds the immediate redials while a peer's port answers with resets.
const maxClosingResets = 3

// redialVerdict judges a redial made right after the peer closed our connection. A refused
// dial means nothing listens on the peer's port: its process is gone. A dial reset by the
// peer, or an authentication handshake the peer closed, is the same process caught dying:
// the kernel completed the TCP handshake on its listening socket and then reset the
// connection as the socket was closed with the process (seen in about one crash in ten on
// loopback), so the next dial, made at once, gives the verdict. Without that second look the
// member waited a whole detection window for heartbeats that could not come.
func redialVerdict(err error) int {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return peerGone
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, errRefused):
		return peerClosing
	}
	return peerMayLive
}

// dial opens a connection to the peer: the one place a client connection is made, so
// anything every connection needs (socket options, the handshake) goes here. Keep-alive and
// TCP_USER_TIMEOUT (sockopt.go) let the kernel give up on a dead peer in seconds rather than
// minutes even when our own silence rule (serve) does not apply. With Auth.Keys the
// handshake follows at once, with a budget of its own (a second round trip:
// max(DialTimeout, CallTimeout) from the connect, so a link with a 300 ms round trip, which the
// dledger profile tolerates, still authenticates); a handshake that times out is treated as a
// dial that did (the peer may be paused), any other failure is an authentication failure
// (*handshakeError).
func (p *peer) dial() (net.Conn, *secure.Session, error) {
	d := net.Dialer{Timeout: p.cl.opts.DialTimeout, KeepAliveConfig: keepAliveConfig,
		Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = setUserTimeout(int(fd), tcpUserTimeout) }) // best effort
		}}
	conn, err := d.DialContext(p.cl.ctx, "tcp", p.addr)
	if err != nil || !p.cl.opts.Auth.secure() {
		return conn, nil, err
	}
	stop := context.AfterFunc(p.cl.ctx, func() { conn.Close() }) // Close ends a handshake in progress
	budget := max(p.cl.opts.DialTimeout, p.cl.opts.CallTimeout)
	sess, err := handshake(conn, &p.cl.opts.Auth, p.id, time.Now().Add(budget))
	stop()
	if err != nil {
		conn.Close()
		var ne net.Error
		switch {
		case p.cl.ctx.Err() != nil:
			return nil, nil, ErrClosed
		case errors.As(err, &ne) && ne.Timeout():
			return nil, nil, err
		}
		return nil, nil, &handshakeError{err}
	}
	return conn, sess, nil
}

// handshakeError is a handshake that failed other than by timing out: it is counted.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "rpc: handshake: " + e.err.Error() }

func (e *handshakeError) Unwrap() error { return e.err }
