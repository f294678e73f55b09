package rpc

// Replacing a connection before closing it (make-before-break), for key rotations
// (PeerKeys.Reload): a rotation must not cost a link. Issue 32 found the cost of the old
// order, close then redial: on a host of many groups, the groups led from the rotated host
// went without heartbeats for one redial, and under the race detector on a loaded machine a
// follower with a 200 ms liveness interval once campaigned.
//
// The new connection is dialled and authenticated on a goroutine of its own while the old one
// keeps serving; then the writer hands over (handOver): the peer stays connected and keeps
// its generation, so nothing queued or pending fails; the new connection's writer sends what
// is queued from then on; and the old connection is retired: its reader still delivers the
// answers to the calls it carried, and it closes once none is pending (at most a call timeout
// later). Only then is the replacement done (PeerKeys.AwaitReplacements): the old key carries
// nothing of ours, and a peer that drops it closes nothing.

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/secure"
)

// spareConn is an authenticated connection waiting to take over.
type spareConn struct {
	conn net.Conn
	sess *secure.Session
	done func() // the replacement is done: called once the old connection is retired, or the spare dropped
}

// errSwitched ends a connection's writer that handed over to a replacement.
var errSwitched = errors.New("rpc: connection replaced")

// replaceConn dials a replacement for old, the connection being served, with the identity in
// force now, and has the writer hand over to it once it has authenticated. why is the reason
// the peer's key is no longer accepted (nil: our own key was rotated, and the peer still
// accepts the old one): with why, old is closed at once if no replacement can be made, since
// its key is no longer trusted. done is called once the outcome is settled.
func (p *peer) replaceConn(old net.Conn, why error, done func()) {
	p.mu.Lock()
	if p.closed || p.conn != old || p.replacing {
		busy := !p.closed && p.conn == old // a replacement is under way: it decides
		p.mu.Unlock()
		if why != nil && !busy {
			_ = old.Close()
		}
		done()
		return
	}
	p.replacing = true
	p.cl.wg.Add(1) // under mu, before Close (which sets closed under mu) can Wait
	p.mu.Unlock()
	if why != nil { // the peer's old key is no longer accepted: its connection ends, as a close would
		p.cl.obs.authFailure(authReason(why), p.addr, p.id, fmt.Errorf("replaced at a reload: %w", why))
	}
	go p.dialReplacement(old, why, done)
}

// dialReplacement is replaceConn's dial: the spare, handed to the writer, or the failure.
func (p *peer) dialReplacement(old net.Conn, why error, done func()) {
	defer p.cl.wg.Done()
	conn, sess, err := p.dial()
	p.mu.Lock()
	p.replacing = false
	ok := err == nil && !p.closed && p.conn == old && p.spare == nil
	if ok {
		p.spare = &spareConn{conn: conn, sess: sess, done: done}
	}
	p.mu.Unlock()
	switch {
	case ok:
		select {
		case p.swap <- struct{}{}:
		default:
		}
		p.cl.obs.logAt(zap.DebugLevel).Debug("rpc: replacement connection ready", zap.String("peer", p.id))
		return // done once the writer has handed over and the old connection is retired
	case err == nil:
		_ = conn.Close()
	case !errors.Is(err, ErrClosed):
		p.dialFailed(err)
	}
	if why != nil {
		_ = old.Close() // revoked for this peer and not replaceable: closed, as before
	}
	done()
}

// handOver is the writer's answer to a swap signal: errSwitched if a replacement is waiting
// (the writer then retires its connection), nil if the signal is stale.
func (p *peer) handOver() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spare == nil {
		return nil
	}
	p.keepGen = true // the replacement takes over this generation: queued frames go out on it
	return errSwitched
}

// retireCheck is how often a retired connection looks for the answers it still carries.
const retireCheck = time.Millisecond

// retire lets a replaced connection's reader deliver the answers to the calls it carried (the
// ids up to cut) until none is pending, for at most a call timeout (a call waits no longer),
// then closes it and calls done. The client's Close closes it at once.
func (p *peer) retire(conn net.Conn, readDone <-chan error, cut uint64, done func()) {
	p.cl.wg.Add(1) // the run goroutine holds the group: Close cannot be waiting on zero
	go func() {
		defer p.cl.wg.Done()
		defer done()
		limit := time.NewTimer(p.cl.opts.CallTimeout)
		defer limit.Stop()
		tick := time.NewTicker(retireCheck)
		defer tick.Stop()
		for p.carries(cut) {
			select {
			case <-readDone:
			case <-limit.C:
			case <-p.cl.ctx.Done():
			case <-tick.C:
				continue
			}
			break
		}
		_ = conn.Close()
	}()
}

// carries says whether a call with an id up to cut is pending.
func (p *peer) carries(cut uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.pending {
		if id <= cut {
			return true
		}
	}
	return false
}

// nextConn is the spare connection if one is waiting, else a new dial.
func (p *peer) nextConn() (net.Conn, *secure.Session, error) {
	p.mu.Lock()
	s := p.spare
	p.spare = nil
	p.mu.Unlock()
	if s != nil {
		s.done() // taken without a hand-over: the connection it replaces is gone already
		return s.conn, s.sess, nil
	}
	return p.dial()
}

// dropSpare closes a spare connection left when the peer's goroutine ends.
func (p *peer) dropSpare() {
	p.mu.Lock()
	s := p.spare
	p.spare = nil
	p.mu.Unlock()
	if s != nil {
		_ = s.conn.Close()
		s.done()
	}
}

// retireSwitched retires conn, which the writer has just handed over: the spare's done is
// called once it is retired, and the spare stays for the run loop to serve.
func (p *peer) retireSwitched(conn net.Conn, readDone <-chan error) {
	p.mu.Lock()
	s := p.spare
	done := s.done
	s.done = func() {} // nextConn must not call it again
	cut := p.nextID.Load()
	p.mu.Unlock()
	p.retire(conn, readDone, cut, done)
}
