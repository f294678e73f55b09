package rpc

import (
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
}

// liveSession is one authenticated connection: who it authenticated as, with what key, and
// how to close it (counting the reason).
type liveSession struct {
	peer  string
	key   secure.PublicKey
	close func(err error)
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

// Reload makes next the identity of every later handshake and closes every live connection
// whose peer next does not accept (Identity.Check: a revoked key, a key moved to another
// id, an id no longer listed), counting each as an authentication failure of that reason.
// Connections it still accepts, whatever key they used, stay up. It returns how many it
// closed. A handshake in progress that finishes after the reload is checked against next.
func (k *PeerKeys) Reload(next *secure.Identity) (closed int) {
	if next == nil {
		return 0
	}
	var doomed []*liveSession
	var errs []error
	k.mu.Lock()
	k.id.Store(next)
	for ls := range k.live {
		if err := next.Check(ls.peer, ls.key); err != nil {
			doomed, errs = append(doomed, ls), append(errs, err)
			delete(k.live, ls)
		}
	}
	k.mu.Unlock()
	for i, ls := range doomed { // outside the lock: close may take a connection's own locks
		ls.close(errs[i])
	}
	return len(doomed)
}

// track registers a connection that authenticated as peer with key; close is how Reload
// closes it. It refuses (with the reason) a session the current identity no longer accepts:
// a reload ran between its handshake and now. untrack must be called when it closes.
func (k *PeerKeys) track(peer string, key secure.PublicKey, close func(error)) (untrack func(), err error) {
	ls := &liveSession{peer: peer, key: key, close: close}
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
