package server

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"weak"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
)

// sharedSettings is a host's one copy of each of its members' settings but their own (Group,
// SelfID, DataDir), and their peers parsed: the members of a host of many groups are mostly
// configured alike (the proxy list's entries differ in group and id), and each kept a 320-byte
// Config and its own copies of the peers (issue 29, docs/design.md "What a member costs"). Weak pointers: settings no member uses any more are
// collected, and their entry dropped by a later sweep.
type sharedSettings struct {
	mu      sync.Mutex
	m       map[string]weak.Pointer[sharedEntry]
	sweepAt int // len(m) at which dead entries are swept next
	// last is the entry shareSettings returned last, and lastKey the Config it was asked for
	// (keys cleared, as the key has them).
	last    weak.Pointer[sharedEntry]
	lastKey Config
}

// sharedEntry is one shared Config and its peers parsed: the members that share it keep a
// pointer to cfg (which keeps the entry alive) and the peers slice, which nothing changes
// (membership changes replace a member's peers, never write into them).
type sharedEntry struct {
	cfg   Config
	peers []memberstate.Peer
}

// shareSettings returns the host's copy of c with its Group, SelfID and DataDir empty (settings
// keeps those) and of peers (c.Peers parsed), or c and peers themselves when c does not
// authenticate as the host does (its own keys: then they are its own). The copy carries the
// keys of the first member that made it, equal to the host's (memberAuth). Nothing may change what it returns. Not under
// h.mu (AddGroup holds it around New).
func (h *Host) shareSettings(c *Config, peers []memberstate.Peer) (*Config, []memberstate.Peer) {
	if c.Insecure != h.cfg.Insecure || c.MemberKey != h.cfg.MemberKey || c.Trust != h.cfg.Trust ||
		!c.Keys.Equal(h.cfg.Keys) {
		return c, peers
	}
	k := *c
	k.Group, k.SelfID, k.DataDir = "", "", ""
	// The key names every field but the keys, which the check above found equal to the host's,
	// and their ids (as memberAuth compares key sets), so that no key material is formatted.
	k.Keys, k.MemberKey, k.Trust = secure.KeySet{}, secure.StaticKey{}, nil
	t := &h.settings
	t.mu.Lock()
	defer t.mu.Unlock()
	// The members added one after another are mostly configured alike: the entry the last one
	// took, compared field by field, spares formatting the key (about 17 us a member, a sixth
	// of a host's AddGroup at a cold start of 10,000 members, issue 29).
	if e := t.last.Value(); e != nil && reflect.DeepEqual(&k, &t.lastKey) && slices.Equal(e.peers, peers) {
		return &e.cfg, e.peers
	}
	key := fmt.Sprintf("%#v %q", k, c.Keys.IDs())
	if e := t.m[key].Value(); e != nil && slices.Equal(e.peers, peers) {
		t.last, t.lastKey = t.m[key], k
		t.lastKey.Election.PreferredLeaderIDs = slices.Clone(k.Election.PreferredLeaderIDs) // not the caller's array
		return &e.cfg, e.peers
	}
	if t.m == nil {
		t.m = map[string]weak.Pointer[sharedEntry]{}
	}
	if len(t.m) >= t.sweepAt {
		for k, p := range t.m {
			if p.Value() == nil {
				delete(t.m, k)
			}
		}
		t.sweepAt = max(64, 2*len(t.m))
	}
	k.Keys, k.MemberKey, k.Trust = c.Keys, c.MemberKey, c.Trust
	k.Election.PreferredLeaderIDs = slices.Clone(k.Election.PreferredLeaderIDs) // not the caller's array
	e := &sharedEntry{cfg: k, peers: peers}
	t.m[key] = weak.Make(e)
	t.last, t.lastKey = t.m[key], k
	t.lastKey.Keys, t.lastKey.MemberKey, t.lastKey.Trust = secure.KeySet{}, secure.StaticKey{}, nil
	return &e.cfg, e.peers
}
