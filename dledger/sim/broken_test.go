package sim

import (
	"strings"
	"testing"
)

// The checker itself is tested (docs/protocol.md section 9): with a deliberately broken
// rule, the simulator must report the matching invariant within a few seeds.
func TestCheckerCatchesBrokenRules(t *testing.T) {
	for _, c := range []struct {
		broken   Broken
		scenario Scenario // "" is chaos
		want     []string // any of these invariants
	}{
		{BrokenDoubleVote, "", []string{"S2", "S1"}},
		{BrokenSkipLedgerCheck, "", []string{"S4"}},
		{BrokenForgetOnCrash, "", []string{"S2", "S3"}},
		{BrokenAcceptHasLeader, "", []string{"S1"}},
		{BrokenEventSeenTerm, "", []string{"S5"}},
		{BrokenNoRevote, "", []string{"L1"}},
		{BrokenKeepLostRound, ScenarioRejoin, []string{"L2"}},
		{BrokenEndlessTake, "", []string{"L3", "SIM"}},
		{BrokenNoAbstain, "", []string{"S4"}},
		{BrokenGoneOnCut, ScenarioRejoin, []string{"L2"}},
		{BrokenForgetDeadline, "", []string{"PASS"}},
		{BrokenWindowBelowFloor, ScenarioRejoin, []string{"CALM"}},
	} {
		t.Run(string(c.broken), func(t *testing.T) {
			const maxSeeds = 50
			for seed := uint64(1); seed <= maxSeeds; seed++ {
				r := mustRun(t, Options{Seed: seed, Members: []int{3, 5}[seed%2], Scenario: c.scenario, Broken: c.broken})
				v := r.Violation
				if v == nil {
					continue
				}
				found := false
				for _, inv := range c.want {
					found = found || v.Invariant == inv
				}
				if !found {
					t.Fatalf("seed %d: got %s, want one of %v\n%s", seed, v.Invariant, c.want, r.Report())
				}
				checkReport(t, r)
				t.Logf("caught at seed %d: %s %s", seed, v.Invariant, v.Detail)
				return
			}
			t.Fatalf("%s went unnoticed for %d seeds", c.broken, maxSeeds)
		})
	}
}

// checkReport: a violation names the seed and the invariant, shows the last trace events, and
// gives a replay command that really replays it.
func checkReport(t *testing.T, r Result) {
	t.Helper()
	v := r.Violation
	if len(v.Tail) == 0 || len(v.Tail) > TailSize || !strings.Contains(v.Tail[len(v.Tail)-1], "VIOLATION "+v.Invariant) {
		t.Fatalf("tail of %d lines, last %q", len(v.Tail), v.Tail[len(v.Tail)-1])
	}
	o := r.ReplayOptions
	want := "go run ./cmd/dledger sim --seeds 1 --seed-start " + uitoa(r.Seed) + " --members " + uitoa(uint64(r.Members)) +
		" --profile " + r.Profile
	if !strings.HasPrefix(v.Replay, want) || !strings.HasSuffix(v.Replay, " --trace") {
		t.Fatalf("replay command %q, want it to start with %q", v.Replay, want)
	}
	if o.Broken != "" && !strings.Contains(v.Replay, "--broken "+string(o.Broken)) {
		t.Fatalf("replay command %q does not switch the bug on", v.Replay)
	}
	rep := r.Report()
	for _, s := range []string{"seed=" + uitoa(r.Seed), v.Invariant, v.Replay} {
		if !strings.Contains(rep, s) {
			t.Fatalf("report lacks %q:\n%s", s, rep)
		}
	}
	again := mustRun(t, o)
	if again.Violation == nil || again.Violation.Invariant != v.Invariant || again.TraceHash != r.TraceHash {
		t.Fatalf("replaying seed %d did not reproduce %s", r.Seed, v.Invariant)
	}
}

func uitoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}
