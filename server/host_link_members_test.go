package server

import (
	"errors"
	"maps"
	"testing"
	"unsafe"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
)

// A hosted member's transport follows its group's configuration (issue 31): a peer on a new
// host gets that host's link, a host none of its peers is on any more loses this member (and
// the link is closed when no other member uses it), and a link another member shares stays.
func TestMemberLinkSetPeers(t *testing.T) {
	hl := newHostLinks("A:1", KeySet{}, true, zap.NewNop(), rpc.Hooks{})
	defer hl.closeAll()
	nobody := func() *dledger.Elector { return nil }
	peers := func(s string) []memberstate.Peer { return mustPeers(t, s) }
	m, err := hl.join("g1", "a", peers("a-A:1;b-127.0.0.1:2"), &dledger.Config{}, nobody)
	if err != nil {
		t.Fatal(err)
	}
	other, err := hl.join("g2", "a", peers("a-A:1;b-127.0.0.1:2"), &dledger.Config{}, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := m.caller("c"); !errors.Is(err, rpc.ErrUnknownPeer) {
		t.Fatalf("c before it was added: %v", err)
	}
	if err := m.setPeers(peers("a-A:1;b-127.0.0.1:2;c-127.0.0.1:3")); err != nil {
		t.Fatal(err)
	}
	if n := hl.count(); n != 2 {
		t.Fatalf("%d links after c joined on a new host, want 2", n)
	}
	if _, host, err := m.caller("c"); err != nil || host != "127.0.0.1:3" {
		t.Fatalf("c once added: host %q, %v", host, err)
	}
	// b leaves g1; g2 still has b on its host: that link stays. c's host is g1's alone.
	if err := m.setPeers(peers("a-A:1;c-127.0.0.1:3")); err != nil {
		t.Fatal(err)
	}
	if n := hl.count(); n != 2 {
		t.Fatalf("%d links after b left g1 (g2 still uses its host), want 2", n)
	}
	if _, _, err := m.caller("b"); !errors.Is(err, rpc.ErrUnknownPeer) {
		t.Fatalf("b once removed: %v", err)
	}
	if err := m.setPeers(peers("a-A:1;b-127.0.0.1:2")); err != nil {
		t.Fatal(err)
	}
	if n := hl.count(); n != 1 {
		t.Fatalf("%d links after c left, want 1 (its host's link closed)", n)
	}
	m.Close()
	if err := m.setPeers(peers("a-A:1")); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("setPeers after Close: %v", err)
	}
}

// TestMemberLinkFitsItsAllocationClass: a host keeps a memberLink per member; it keeps its
// member's timings (shared) rather than call bounds of its own, for the 128-byte allocation
// class (issue 29), and bounds its calls as memberTimeouts of those timings.
func TestMemberLinkFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(memberLink{}); n > 128 {
		t.Fatalf("a memberLink is %d bytes, past the 128-byte allocation class", n)
	}
}

// TestHostLinksCountEachMemberOnce: the host keeps one entry a member (hostLinks.members) and a
// count of users per link, not a set of members per link (two map entries a member of a group
// of three: issue 29); a member with two peers on one host counts once on that link, through
// joins, changes of peers and leaves, and a link is closed when its last user leaves. Fails if
// a member is counted twice on a link (the link would outlive it) or not at all (closed under
// another member).
func TestHostLinksCountEachMemberOnce(t *testing.T) {
	hl := newHostLinks("A:1", KeySet{}, true, zap.NewNop(), rpc.Hooks{})
	defer hl.closeAll()
	nobody := func() *dledger.Elector { return nil }
	peers := func(s string) []memberstate.Peer { return mustPeers(t, s) }
	users := func() map[string]int {
		hl.mu.Lock()
		defer hl.mu.Unlock()
		u := map[string]int{}
		for host, l := range hl.links {
			u[host] = l.users
		}
		u["members"] = len(hl.members)
		return u
	}
	want := func(step string, w map[string]int) {
		t.Helper()
		if got := users(); !maps.Equal(got, w) {
			t.Fatalf("%s: users %v, want %v", step, got, w)
		}
	}
	// m has two peers on host B (b1, b2) and one on C.
	m, err := hl.join("g1", "a", peers("a-A:1;b1-127.0.0.1:2;b2-127.0.0.1:2;c-127.0.0.1:3"), &dledger.Config{}, nobody)
	if err != nil {
		t.Fatal(err)
	}
	want("m joined", map[string]int{"127.0.0.1:2": 1, "127.0.0.1:3": 1, "members": 1})
	o, err := hl.join("g2", "a", peers("a-A:1;b-127.0.0.1:2"), &dledger.Config{}, nobody)
	if err != nil {
		t.Fatal(err)
	}
	want("o joined", map[string]int{"127.0.0.1:2": 2, "127.0.0.1:3": 1, "members": 2})
	if err := m.setPeers(peers("a-A:1;b2-127.0.0.1:2;c-127.0.0.1:3;d-127.0.0.1:4")); err != nil {
		t.Fatal(err)
	}
	want("b1 left g1, d joined", map[string]int{"127.0.0.1:2": 2, "127.0.0.1:3": 1, "127.0.0.1:4": 1, "members": 2})
	if err := m.setPeers(peers("a-A:1;d-127.0.0.1:4;e-127.0.0.1:4")); err != nil {
		t.Fatal(err)
	}
	want("g1 left B and C", map[string]int{"127.0.0.1:2": 1, "127.0.0.1:4": 1, "members": 2})
	m.Close()
	want("m closed", map[string]int{"127.0.0.1:2": 1, "members": 1})
	hl.mu.Lock()
	idle := hl.leaveLocked(m) // a second leave changes nothing
	hl.mu.Unlock()
	if len(idle) != 0 {
		t.Fatalf("a member that left already left again: %d clients to close", len(idle))
	}
	want("m left twice", map[string]int{"127.0.0.1:2": 1, "members": 1})
	o.Close()
	want("o closed", map[string]int{"members": 0})
}

// TestDeferredGoneNewsDroppedWhenTheHostIsBack: the news of a dead host, deferred for the
// members it does not concern (hostLinks.each, goneNewsLater), is dropped if the host's
// connection came up again meanwhile, so a member never hears "gone" after "reachable" of the
// restarted host (it would leave that host's members out of its orders of succession until a
// refresh, up to ten minutes). Fails if the deferred news ignores the come-back.
func TestDeferredGoneNewsDroppedWhenTheHostIsBack(t *testing.T) {
	hl := newHostLinks("A:1", KeySet{}, true, zap.NewNop(), rpc.Hooks{})
	defer hl.closeAll()
	noop := func(*dledger.Elector, string) {}
	const host = "127.0.0.1:2"
	ups := func() uint64 {
		hl.mu.Lock()
		defer hl.mu.Unlock()
		return hl.ups[host]
	}
	hl.each(host, noop, 0) // the host's connection came up
	told := 0
	stale := hl.unlessBack(host, ups(), func() { told++ })
	kept := hl.unlessBack(host, ups(), func() { told += 10 })
	kept()
	if told != 10 {
		t.Fatalf("deferred news with no come-back: told %d, want 10", told)
	}
	hl.each(host, noop, 0) // the host restarted and its connection came up again
	stale()
	if told != 10 {
		t.Fatalf("deferred news of a host that came back was told (%d)", told)
	}
	hl.each("127.0.0.1:3", noop, 0) // another host's connection is no come-back of this one
	hl.unlessBack(host, ups(), func() { told++ })()
	if told != 11 {
		t.Fatalf("deferred news after another host's connection: told %d, want 11", told)
	}
}

// mustPeers parses a peers string of a test.
func mustPeers(t *testing.T, s string) []memberstate.Peer {
	t.Helper()
	ps, err := memberstate.ParsePeers(s)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
