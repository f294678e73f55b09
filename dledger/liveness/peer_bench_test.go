package liveness

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkMemberPeer is the table's query of a plan (Member.Peer): host A's table of 10,000
// members of 3-member groups over hosts A, B and C, both peer hosts fresh and every peer heard
// of, queried for one peer of one member per operation, the members in a random order (a
// survivor's passes in a crash visit thousands of members, each once or twice, whose entries
// are not in the processor's caches).
func BenchmarkMemberPeer(b *testing.B) {
	const n = 10000
	hosts := map[string]string{"a": "A", "b": "B", "c": "C"}
	tb, err := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	if err != nil {
		b.Fatal(err)
	}
	groups := make([]string, n)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-%05d", i)
		if err := tb.AddMemberTold(groups[i], "a", hosts, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
	now := t0
	hearEpoch5(tb, groups, now)
	for _, o := range tb.Due(now) {
		tb.Answered(o.To, now, Ack{Incarnation: 1, Seq: o.Frame.Seq, Upto: 5}, now)
	}
	ms := make([]*Member, n)
	for i, j := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		ms[i] = tb.For(groups[j], "a")
	}
	at := now.Add(time.Millisecond)
	if _, _, ok := ms[0].Peer("b", 5, now, at); !ok {
		b.Fatal("precondition: the table does not vouch for b")
	}
	peers := [2]string{"b", "c"}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ms[i%n].Peer(peers[(i/n)&1], 5, now, at)
	}
}

// Every peer of every local member keeps its host's entry (peerAt.h: the map's, nil for this
// host) through a random sequence of registrations, changes of peers and removals, the entries
// of hosts no member needs dropped and made again meanwhile; and Peer answers with what the
// entry says. Fails if a change of peers (SetPeers) or a registration leaves a peer with no
// entry or a dropped one: its member's queries would read a host the table no longer updates.
func TestPeersKeepTheirHostEntries(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 5))
	tb, err := New(Config{Self: "A", Incarnation: 1, Interval: iv})
	if err != nil {
		t.Fatal(err)
	}
	hostsOf := func() map[string]string { return randomPeerHosts(rnd, "A", "B", "C", "D") }
	live := map[string]bool{}
	for step := range 3000 {
		g := fmt.Sprintf("g%d", rnd.IntN(20))
		switch {
		case !live[g]:
			if err := tb.AddMemberTold(g, "a", hostsOf(), func(string) {}); err != nil {
				t.Fatal(err)
			}
			live[g] = true
		case rnd.IntN(3) == 0:
			tb.RemoveMember(g, "a")
			delete(live, g)
		default:
			if err := tb.SetPeers(g, "a", hostsOf()); err != nil {
				t.Fatal(err)
			}
		}
		for l := range tb.all() {
			for _, p := range l.peers {
				want := tb.hosts[p.host]
				if p.host == "A" {
					want = nil
				}
				if p.h != want || (p.host != "A" && want == nil) {
					t.Fatalf("step %d: %s's peer %s on %s has entry %p, want the map's %p", step, l.group, p.id, p.host, p.h, want)
				}
			}
		}
	}
	for g := range live { // Peer reads the entry: a frame from each host heard, then every peer's answer
		for _, h := range []string{"B", "C", "D"} {
			tb.Received(h, Frame{Incarnation: 1, Seq: 1}, t0)
		}
		m := tb.For(g, "a")
		for _, p := range m.l.peers {
			heard, _, _ := m.Peer(p.id, 1, t0, t0)
			if (p.host == "A") != heard.IsZero() {
				t.Fatalf("%s's peer %s on %s heard at %v", g, p.id, p.host, heard)
			}
		}
	}
}

// hearEpoch5 has tb (host A's table) receive a frame from each peer host B and C saying that
// its member (b, c) of every group in groups is at epoch 5, complete up to 5.
func hearEpoch5(tb *Table, groups []string, now time.Time) {
	for _, h := range []string{"B", "C"} {
		ch := make([]Change, 0, len(groups))
		for _, g := range groups {
			ch = append(ch, Change{Group: g, Member: map[string]string{"B": "b", "C": "c"}[h], Epoch: 5})
		}
		tb.Received(h, Frame{Incarnation: 1, Seq: 1, Changes: ch, Upto: 5, Sent: 5, From: 1}, now)
	}
}
