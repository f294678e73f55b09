package server

import (
	"fmt"
	"slices"
	"sync"
	"weak"

	"github.com/dledger-go/dledger/rpc/secure"
)

// sharedSettings is a host's one copy of each of its members' settings but their own (Group,
// SelfID, DataDir): the members of a host of many groups are mostly configured alike (the
// proxy list's entries differ in group and id), and each kept a 320-byte Config (issue 29,
// docs/design.md "What a member costs"). Weak pointers: settings no member uses any more are
// collected, and their entry dropped by a later sweep.
type sharedSettings struct {
	mu      sync.Mutex
	m       map[string]weak.Pointer[Config]
	sweepAt int // len(m) at which dead entries are swept next
}

// shareSettings returns the host's copy of c with its Group, SelfID and DataDir empty (settings
// keeps those), or c itself when c does not authenticate as the host does (its own keys: then
// it is its own). The copy carries the host's keys, which c's equal (memberAuth). Nothing may
// change a Config it returns. Not under h.mu (AddGroup holds it around New).
func (h *Host) shareSettings(c *Config) *Config {
	if c.Insecure != h.cfg.Insecure || c.MemberKey != h.cfg.MemberKey || c.Trust != h.cfg.Trust ||
		!slices.Equal(c.Keys.IDs(), h.cfg.Keys.IDs()) {
		return c
	}
	k := *c
	k.Group, k.SelfID, k.DataDir = "", "", ""
	// The key names every field but the keys (the host's, equal for every member here), so
	// that no key material is formatted.
	k.Keys, k.MemberKey, k.Trust = secure.KeySet{}, secure.StaticKey{}, nil
	key := fmt.Sprintf("%#v", k)
	t := &h.settings
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[key].Value(); p != nil {
		return p
	}
	if t.m == nil {
		t.m = map[string]weak.Pointer[Config]{}
	}
	if len(t.m) >= t.sweepAt {
		for k, p := range t.m {
			if p.Value() == nil {
				delete(t.m, k)
			}
		}
		t.sweepAt = max(64, 2*len(t.m))
	}
	k.Keys, k.MemberKey, k.Trust = h.cfg.Keys, h.cfg.MemberKey, h.cfg.Trust
	k.Election.PreferredLeaderIDs = slices.Clone(k.Election.PreferredLeaderIDs) // not the caller's array
	p := &k
	t.m[key] = weak.Make(p)
	return p
}
