package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

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
