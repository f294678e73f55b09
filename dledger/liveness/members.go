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
	t.unindex(l)
	old := l.peers
	l.peers = peersOf(self, peerHost)
	for i, p := range l.peers {
		if q := (&local{peers: old}).peerOf(p.id); q != nil && q.host == p.host {
			l.peers[i].r = q.r // what the table knew of a peer it keeps
		}
	}
	l.rely = l.rely.remap(old, l.peers) // what it said, by id: its member says again at its next pass
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
	t.linkHosts(l) // after the entries no member needs are dropped and the new ones made
	t.index(l)
	return nil
}

// remap is r, said over the peers old, over the peers now: a peer's bit follows its id, and a
// peer no longer there drops out (a quorum peer fewer counts as one fewer fresh: woken sooner,
// never later). Reset instead, a member whose elector saw its reliance unchanged by the
// change (the elector compares its own bits) relied on every peer until it changed, woken by
// every turn of every peer host (issue 29's review).
func (r reliance) remap(old, now []peerAt) reliance {
	if !r.known || len(now) > maxRelyPeers {
		return reliance{}
	}
	out := reliance{need: r.need, known: true}
	in := &local{peers: now}
	for i, p := range old {
		j := in.indexOf(p.id)
		if j < 0 {
			continue
		}
		if r.quorum&(1<<i) != 0 {
			out.quorum |= 1 << j
		}
		if r.also&(1<<i) != 0 {
			out.also |= 1 << j
		}
	}
	return out
}
