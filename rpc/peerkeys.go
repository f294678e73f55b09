package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/dledger-go/dledger/rpc/secure"
)

// PeerKeys is a member's (or a host's) side of the member-key handshake (secure.Identity:
// its key pair and trust list), shared by its Server and its Client and replaced while they
// run (Reload). Each connection authenticated with it is tracked, from the end of its
// handshake to its close, so that a reload can close the ones the new trust list no longer
// accepts: a revoked key loses its links at once, not at its next reconnect. Tracking costs a
// map entry per connection and nothing per frame.
type PeerKeys struct {
	id atomic.Pointer[secure.Identity]

	mu   sync.Mutex // orders track against Reload: no session escapes a reload's check
	live map[*liveSession]struct{}
	// inflight counts the replacements Reload started that have not resolved; drained is
	// closed when it falls to 0 (AwaitReplacements).
	inflight int
	drained  chan struct{}
}

// liveSession is one authenticated connection: who it authenticated as, with what key, and
// how to close it (counting the reason). A connection this side dialled (a client's) also
// says which key of ours it authenticated with, and how to replace it: dial a new connection
// first, and retire this one once the new one has authenticated (make-before-break).
type liveSession struct {
	peer    string
	key     secure.PublicKey
	own     secure.PublicKey // ours, on a client's connection
	close   func(err error)
	replace func(why error, done func()) // nil on a server's connection
}

// NewPeerKeys returns the holder of id (secure.NewIdentity).
func NewPeerKeys(id *secure.Identity) (*PeerKeys, error) {
	if id == nil {
		return nil, errors.New("rpc: NewPeerKeys: no identity")
	}
	k := &PeerKeys{live: map[*liveSession]struct{}{}}
	k.id.Store(id)
	return k, nil
}

// Identity is the identity handshakes start with now.
func (k *PeerKeys) Identity() *secure.Identity { return k.id.Load() }

// Reload makes next the identity of every later handshake and ends every live connection
// whose peer next does not accept (Identity.Check: a revoked key, a key moved to another
// id, an id no longer listed), counting each as an authentication failure of that reason. It
// returns how many it ended. Connections it still accepts, whatever key they used, stay up. A
// handshake in progress that finishes after the reload is checked against next.
//
// A key rotation must not cost a link (docs/design.md, "Member keys"), so two kinds of
// connection this side dialled are replaced rather than closed: make-before-break, the new
// connection dialled and authenticated with next before the old one is retired. One whose
// peer next still lists under other keys (the peer's key was rotated: its old one dropped),
// ended and counted as above; and one this side authenticated with a key of its own that next
// no longer holds (our own key was rotated), which the peer still accepts, so it is neither
// ended nor counted. A replacement that cannot authenticate closes a rotated peer's connection
// at once, and leaves ours as it was. A peer next no longer lists at all (revoked, removed)
// has its connections closed at once, and so does every connection the peer dialled (its
// side replaces those when its own key changes). AwaitReplacements waits for the
// replacements to resolve.
func (k *PeerKeys) Reload(next *secure.Identity) (closed int) {
	if next == nil {
		return 0
	}
	type ending struct {
		ls      *liveSession
		err     error
		replace bool
	}
	var ends []ending
	k.mu.Lock()
	k.id.Store(next)
	for ls := range k.live {
		err := next.Check(ls.peer, ls.key)
		switch {
		case err == nil && (ls.replace == nil || ls.own == next.Public()):
			continue // accepted, and ours is still our key
		case err == nil:
			ends = append(ends, ending{ls: ls, replace: true})
		case ls.replace != nil && next.Trust().Keys(ls.peer) != nil:
			ends = append(ends, ending{ls: ls, err: err, replace: true})
			closed++
		default:
			ends = append(ends, ending{ls: ls, err: err})
			closed++
		}
		delete(k.live, ls)
		if ends[len(ends)-1].replace {
			if k.inflight == 0 {
				k.drained = make(chan struct{})
			}
			k.inflight++
		}
	}
	k.mu.Unlock()
	for _, e := range ends { // outside the lock: close may take a connection's own locks
		if e.replace {
			e.ls.replace(e.err, k.replaced)
		} else {
			e.ls.close(e.err)
		}
	}
	return closed
}

// replaced marks one replacement Reload started as resolved.
func (k *PeerKeys) replaced() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inflight--; k.inflight == 0 {
		close(k.drained)
		k.drained = nil
	}
}

// AwaitReplacements waits until every replacement a Reload started has resolved (its new
// connection authenticated and handed over, or failed), or ctx ends. A reload of our own key
// is done, as far as the peers can tell, once the old key carries no connection of ours: they
// may then drop it without closing a link.
func (k *PeerKeys) AwaitReplacements(ctx context.Context) error {
	k.mu.Lock()
	ch := k.drained
	k.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// track registers a connection that authenticated as peer with key; close is how Reload
// closes it. It refuses (with the reason) a session the current identity no longer accepts:
// a reload ran between its handshake and now. untrack must be called when it closes.
func (k *PeerKeys) track(peer string, key secure.PublicKey, close func(error)) (untrack func(), err error) {
	return k.trackDialled(peer, key, secure.PublicKey{}, close, nil)
}

// trackDialled is track for a connection this side dialled, authenticated with our key own:
// replace is how Reload replaces it (Reload's doc), calling done once resolved.
func (k *PeerKeys) trackDialled(peer string, key, own secure.PublicKey, close func(error),
	replace func(why error, done func())) (untrack func(), err error) {
	ls := &liveSession{peer: peer, key: key, own: own, close: close, replace: replace}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.id.Load().Check(peer, key); err != nil {
		return nil, err
	}
	k.live[ls] = struct{}{}
	return func() {
		k.mu.Lock()
		delete(k.live, ls)
		k.mu.Unlock()
	}, nil
}

// Live is how many authenticated connections are tracked now (tests, status).
func (k *PeerKeys) Live() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.live)
}

// LiveWith is how many authenticated connections with peer are tracked now, both ways (tests,
// and a removed member's links: docs/protocol.md 13.9).
func (k *PeerKeys) LiveWith(peer string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for ls := range k.live {
		if ls.peer == peer {
			n++
		}
	}
	return n
}
