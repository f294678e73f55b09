package sim

import (
	"strings"
	"testing"
)

// The checker catches the two planted bugs of reconfigurations (docs/protocol.md 13.8): a
// change of two voters at once, and a commit on the new configuration's quorum alone.
func TestCheckerCatchesReconfigBugs(t *testing.T) {
	for _, b := range []Broken{BrokenTwoVoters, BrokenCommitNewQuorum} {
		t.Run(string(b), func(t *testing.T) {
			for seed := uint64(1); seed <= 50; seed++ {
				r := mustRun(t, Options{Seed: seed, Members: []int{3, 5}[seed%2], Broken: b})
				if r.Violation == nil {
					continue
				}
				if inv := r.Violation.Invariant; inv != "S7" && inv != "S6" && inv != "S1" {
					t.Fatalf("seed %d: got %s, want S7, S6 or S1\n%s", seed, inv, r.Report())
				}
				if !strings.Contains(r.Violation.Replay, "--reconfig") {
					t.Fatalf("replay %q does not switch reconfigurations on", r.Violation.Replay)
				}
				checkReport(t, r)
				t.Logf("caught at seed %d: %s %s", seed, r.Violation.Invariant, r.Violation.Detail)
				return
			}
			t.Fatalf("%s went unnoticed for 50 seeds", b)
		})
	}
}

// Runs with reconfigurations change the configuration many times (adds, promotes, removes,
// the leader handing over to be removed), hold every invariant, and replay exactly.
func TestReconfigRuns(t *testing.T) {
	commits, seeds := 0, uint64(12)
	for seed := uint64(1); seed <= seeds; seed++ {
		var tr strings.Builder
		o := Options{Seed: seed, Members: []int{3, 5}[seed%2], Profile: []string{"lan", "dledger"}[(seed/2)%2], Reconfig: true, Trace: &tr}
		r := mustRun(t, o)
		if r.Violation != nil {
			t.Fatalf("seed %d: %s", seed, r.Report())
		}
		commits += strings.Count(tr.String(), "first seen committed")
		o.Trace = nil
		if again := mustRun(t, o); again.TraceHash != r.TraceHash {
			t.Fatalf("seed %d did not replay", seed)
		}
	}
	if commits < int(seeds)*3 {
		t.Fatalf("%d configurations committed in %d seeds: the runs barely reconfigure", commits, seeds)
	}
	t.Logf("%d configurations committed in %d seeds", commits, seeds)
}
