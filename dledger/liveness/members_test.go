package liveness

import "testing"

// SetPeers (issue 31): a peer host still shared keeps vouching through a change of the group's
// members (a changed configuration must not make a live leader look stale), a host no member
// needs any more gets no frames, and a host newly named gets them.
func TestSetPeersKeepsSharedHostsAndDropsUnused(t *testing.T) {
	p := newPair(t, 1, 1)
	ma, mb := p.a.For("g1", "a"), p.b.For("g1", "b")
	ea, eb := ma.Changed(), mb.Changed()
	p.both(t0)
	now := t0.Add(iv)
	p.both(now)
	if _, _, ok := ma.Peer("b", eb, t0, now); !ok {
		t.Fatal("a's table does not vouch for b before the change")
	}
	if _, _, ok := mb.Peer("a", ea, t0, now); !ok {
		t.Fatal("b's table does not vouch for a before the change")
	}
	// g1 gains a member on host C; B is still shared.
	if err := p.a.SetPeers("g1", "a", map[string]string{"a": "A", "b": "B", "c": "C"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := ma.Peer("b", eb, t0, now); !ok {
		t.Fatal("a's table stopped vouching for b, still a peer, after the change")
	}
	to := map[string]bool{}
	for _, o := range p.a.Due(now.Add(iv)) {
		to[o.To] = true
	}
	if !to["B"] || !to["C"] {
		t.Fatalf("frames due to %v, want B and the new host C", to)
	}
	// Neither group needs B any more: no frames to it.
	for _, g := range []string{"g1", "g2"} {
		if err := p.a.SetPeers(g, "a", map[string]string{"a": "A", "c": "C"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range p.a.Due(now.Add(3 * iv)) {
		if o.To == "B" {
			t.Fatal("a frame to B, which no member needs any more")
		}
	}
	if err := p.a.SetPeers("g9", "a", nil); err == nil {
		t.Fatal("SetPeers of a member not registered succeeded")
	}
}
