package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger/liveness"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestSplitFitsEveryPart: a frame's changes are cut into parts that each fit one host
// heartbeat (at most MaxHostChanges, at most frameBudget bytes of names), in order, nothing
// lost or repeated; an empty frame is one empty part.
func TestSplitFitsEveryPart(t *testing.T) {
	if parts := split(nil); len(parts) != 1 || len(parts[0]) != 0 {
		t.Fatalf("empty: %v", parts)
	}
	for _, tc := range []struct {
		n    int
		name int // group name length
	}{{1, 2}, {protocol.MaxHostChanges, 2}, {protocol.MaxHostChanges + 1, 2}, {10000, 2}, {3000, 255}} {
		var changes []protocol.HostChange
		for i := range tc.n {
			changes = append(changes, protocol.HostChange{Group: strings.Repeat("g", tc.name-1) + fmt.Sprint(i%10), Member: "n0", Epoch: uint64(i + 1)})
		}
		var joined []protocol.HostChange
		for _, p := range split(changes) {
			cost := 0
			for _, c := range p {
				cost += changeCost(c.Group, c.Member)
			}
			if len(p) == 0 || len(p) > protocol.MaxHostChanges || cost > frameBudget {
				t.Fatalf("%d changes of %d-byte groups: a part of %d changes, %d bytes", tc.n, tc.name, len(p), cost)
			}
			joined = append(joined, p...)
		}
		if !slices.Equal(joined, changes) {
			t.Fatalf("%d changes: parts do not join back to the frame", tc.n)
		}
	}
}

// TestFrameWithNoLinkIsLost: a frame due to a host no link reaches (its last member left, or
// the first is still joining) is lost, so its changes are sent again by a later frame instead
// of staying in flight for good (review of 2026-11-27).
func TestFrameWithNoLinkIsLost(t *testing.T) {
	links := newHostLinks("h1", KeySet{}, true, zap.NewNop(), rpc.Hooks{})
	l, err := newHostLive("h1", 100*time.Millisecond, links, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	links.live = l
	peers := []memberstate.Peer{{ID: "a", Addr: "h1"}, {ID: "b", Addr: "h2"}}
	if err := l.addMember("g", "a", peers, nil); err != nil {
		t.Fatal(err)
	}
	l.table.For("g", "a").Changed()
	now := time.Now()
	for _, out := range l.table.Due(now) {
		l.send(out, now) // no link to h2
	}
	sent := 0
	for _, out := range l.table.Due(now.Add(time.Second)) {
		sent += len(out.Frame.Changes)
	}
	if sent != 1 {
		t.Fatalf("the change of a frame that could not be sent went again %d times, want 1", sent)
	}
}

// TestWireChangesShareTheFramesArray: a frame's changes go out as the wire's type in the same
// array, field for field (issue 29, halloc: a copy per frame).
func TestWireChangesShareTheFramesArray(t *testing.T) {
	cs := []liveness.Change{{Group: "g1", Member: "n0", Epoch: 7}, {Group: "g22", Member: "n2", Epoch: 1 << 40}}
	w := wireChanges(cs)
	if len(w) != 2 || &w[0] != (*protocol.HostChange)(unsafe.Pointer(&cs[0])) {
		t.Fatal("not the frame's array")
	}
	for i := range cs {
		if w[i] != protocol.HostChange(cs[i]) {
			t.Fatalf("change %d reads %+v, want %+v", i, w[i], cs[i])
		}
	}
	if wireChanges(nil) != nil {
		t.Fatal("no changes made a list")
	}
}
