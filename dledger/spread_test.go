package dledger

import (
	"fmt"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
)

// With SpreadStartup the start-up ranks of a group's members stay a permutation (one first
// candidate per group, every member agreeing), preferred leaders keep the first places, and
// over many groups of the same three members the first candidate is each member about a third
// of the time. Without it (the 1000-seed campaign's electors) the order is the configuration's.
func TestSpreadStartupRanks(t *testing.T) {
	rankOf := func(group, self string, preferred []string, spread bool) int {
		t.Helper()
		cfg := testConfig()
		cfg.PreferredLeaderIDs = preferred
		ms, err := memberstate.New(group, self, peersOf(3), memberstate.NewMemStore())
		if err != nil {
			t.Fatal(err)
		}
		e, err := newElector(cfg, ms, Options{Clock: newFakeClock(), Rand: zeroRand, Transport: &recTransport{}, SpreadStartup: spread})
		if err != nil {
			t.Fatal(err)
		}
		return e.startupRank()
	}
	const groups = 3000
	first := map[string]int{}
	for g := range groups {
		group := fmt.Sprintf("g%d", g)
		seen := map[int]string{}
		for _, self := range []string{"n0", "n1", "n2"} {
			r := rankOf(group, self, nil, true)
			if other, dup := seen[r]; dup || r < 0 || r > 2 {
				t.Fatalf("group %s: %s has rank %d (also %q): not a permutation", group, self, r, other)
			}
			seen[r] = self
			if r == 0 {
				first[self]++
			}
			if r0 := rankOf(group, self, nil, false); fmt.Sprintf("n%d", r0) != self {
				t.Fatalf("group %s without spread: %s has rank %d", group, self, r0)
			}
		}
		if g%100 == 0 {
			if r := rankOf(group, "n2", []string{"n2"}, true); r != 0 {
				t.Fatalf("group %s: preferred n2 has rank %d", group, r)
			}
			if a, b := rankOf(group, "n0", []string{"n2"}, true), rankOf(group, "n1", []string{"n2"}, true); a+b != 3 || a < 1 || b < 1 {
				t.Fatalf("group %s, n2 preferred: n0 and n1 have ranks %d and %d", group, a, b)
			}
		}
	}
	for _, self := range []string{"n0", "n1", "n2"} {
		if n := first[self]; n < groups/3*9/10 || n > groups/3*11/10 {
			t.Errorf("%s is the first candidate of %d of %d groups, want about a third: %v", self, n, groups, first)
		}
	}
}
