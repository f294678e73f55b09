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
	l := t.find(k)
	if l == nil {
		return fmt.Errorf("liveness: member %s of group %s is not registered", self, group)
	}
	before := l.hostSet(t.cfg.Self)
	old := l.peers
	l.peers = peersOf(self, peerHost)
	for i, p := range l.peers {
		if q := (&local{peers: old}).peerOf(p.id); q != nil && q.host == p.host {
			l.peers[i].r = q.r // what the table knew of a peer it keeps
		}
	}
	l.rely = reliance{} // its bits named the old peers: it relies on every peer until it says again
	after := l.hostSet(t.cfg.Self)
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
