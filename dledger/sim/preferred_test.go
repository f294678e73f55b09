package sim

import (
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// Half the chaos runs pin a preferred leader (docs/protocol.md 7.9); every invariant is checked in them as
// in any run. After the final heal such a run goes on, with no more faults, until the preferred
// member leads or PreferredBound passes: a preferred member that is up must then be leading.
// Without preferred-leader hand-overs it would lead only by chance, one run in the group size.
func TestPreferredLeaderRuns(t *testing.T) {
	seeds := 60
	if testing.Short() || raceEnabled {
		seeds = 20
	}
	runs, up := 0, 0
	for seed := uint64(1); runs < seeds; seed++ {
		r := mustRun(t, Options{Seed: seed, Members: []int{3, 5}[seed%2], Profile: dledger.ProfileLAN, Scenario: ScenarioChaos})
		if r.Violation != nil {
			t.Fatalf("seed %d:\n%s", seed, r.Report())
		}
		if r.Preferred == "" || r.CeilingReached {
			continue // at protocol.MaxTerm no hand-over can happen: it needs a new term
		}
		runs++
		if !r.PreferredUp {
			continue // crashed and kept down by the last fault phase: it cannot lead
		}
		up++
		if r.FinalLeader != r.Preferred {
			t.Errorf("seed %d (%d members): the run ended with %q leading, not the preferred %s; replay: %s",
				seed, r.Members, r.FinalLeader, r.Preferred, ReplayCommand(r.ReplayOptions))
		}
	}
	if up < runs/2 {
		t.Fatalf("the preferred member was up at the end of only %d of %d runs: the test checks little", up, runs)
	}
}
