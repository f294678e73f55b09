package dledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/memberstate"
)

// TestSuccessionOrderSpreadKeepsItsPlacesOnALoss: on hosts the order of succession's last
// tie-break is rotated by the group's hash over the configuration's voters, not over the
// followers alive now, so losing a follower only takes it out of the order and the leader's
// quiet followers stay quiet (onlyLosses, docs/protocol.md 12.2 rule 2). (Rotated over the
// alive followers, 69 of 100 five-member groups reordered the rest on a loss.)
func TestSuccessionOrderSpreadKeepsItsPlacesOnALoss(t *testing.T) {
	for _, members := range []int{3, 5} {
		firsts := map[string]int{}
		for g := range 100 {
			ms, err := memberstate.New(fmt.Sprintf("g%d", g), "n0", peersOf(members), memberstate.NewMemStore())
			if err != nil {
				t.Fatal(err)
			}
			e, err := newElector(testConfig(), ms, Options{Clock: newFakeClock(), Rand: zeroRand, Transport: &recTransport{}, SpreadStartup: true})
			if err != nil {
				t.Fatal(err)
			}
			e.mu.Lock()
			e.peers = make([]peerStatus, members)
			for i := range ms.Peers() {
				e.peers[i] = peerStatus{alive: true, known: true, ledger: memberstate.LedgerEnd{Term: 1, Index: 10}}
			}
			before := e.successorOrder()
			firsts[strings.Split(before, ";")[0]]++
			for lose := 1; lose < members; lose++ {
				e.peers[lose].alive = false
				if now := e.successorOrder(); !e.onlyLosses(before, now) {
					t.Errorf("%d members, g%d: losing n%d reordered %v to %v", members, g, lose, before, now)
				}
				e.peers[lose].alive = true
			}
			e.mu.Unlock()
		}
		if len(firsts) != members-1 {
			t.Errorf("%d members: first successors %v, want every follower first in some groups", members, firsts)
		}
	}
}
