package memberstate

import (
	"fmt"
	"strings"
	"testing"
)

// TestParsePeersAllocatesOnlyItsList: parsing a valid peers string allocates the split and the
// list it returns, nothing per member (a host of 10,000 groups parses 30,000 at its start); and
// duplicate ids are refused in a short list (pair by pair) as in a long one (a set).
func TestParsePeersAllocatesOnlyItsList(t *testing.T) {
	s := "n0-127.0.0.1:7001;n1-127.0.0.1:7002;n2-127.0.0.1:7003"
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParsePeers(s); err != nil {
			t.Fatal(err)
		}
	}); n > 2 {
		t.Fatalf("ParsePeers of 3 members: %v allocations, want at most 2 (the split, the list)", n)
	}
	for _, n := range []int{2, smallPeers, smallPeers + 1, 40} {
		var items []string
		for i := range n {
			items = append(items, fmt.Sprintf("n%d-h:%d", i, 7000+i))
		}
		if _, err := ParsePeers(strings.Join(items, ";")); err != nil {
			t.Fatalf("%d members: %v", n, err)
		}
		items = append(items, fmt.Sprintf("n%d-h:1", n-1))
		_, err := ParsePeers(strings.Join(items, ";"))
		if want := fmt.Sprintf("peers: duplicate member id %q", fmt.Sprintf("n%d", n-1)); err == nil || err.Error() != want {
			t.Fatalf("%d members and a duplicate: %v, want %q", n, err, want)
		}
	}
}
