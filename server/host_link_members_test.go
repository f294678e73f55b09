package server

import (
	"errors"
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
	peers := func(s string) []memberstate.Peer {
		ps, err := memberstate.ParsePeers(s)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
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
