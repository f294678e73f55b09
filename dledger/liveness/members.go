package liveness

import (
	"fmt"
	"slices"
)

// SetPeers replaces the peers of registered member self of group (issue 31: the group's
// members changed while it runs; peerHost as AddMember takes it). A peer host the member
// still shares keeps its state (what it vouches for, what is pending to it), so a change never
// makes a live leader look stale; a host newly needed starts stale, as in AddMember; one no
// local member needs any more gets no more frames, as in RemoveMember.
func (t *Table) SetPeers(group, self string, peerHost map[string]string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{group, self}
	l := t.locals[k]
	if l == nil {
		return fmt.Errorf("liveness: member %s of group %s is not registered", self, group)
	}
	before := l.hosts
	l.peers = peersOf(self, peerHost)
	l.rely = reliance{} // its bits named the old peers: it relies on every peer until it says again
	l.hosts = l.hostSet(t.cfg.Self)
	after := l.hosts
	for _, h := range after {
		if slices.Contains(before, h) {
			continue
		}
		t.hostFor(h).refs++
	}
	for _, h := range before {
		if slices.Contains(after, h) {
			continue
		}
		hs := t.hosts[h]
		hs.refs--
		hs.pending.drop(k)
		if hs.refs == 0 {
			delete(t.hosts, h)
			t.order = slices.DeleteFunc(t.order, func(x string) bool { return x == h })
		}
	}
	return nil
}
