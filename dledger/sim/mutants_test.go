package sim

// Tests written against mutants that survived scripts/mutation.sh (case expressions, which
// gremlins cannot see): each names the mutants it kills.

import (
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// How runs start is drawn at the rates docs/protocol.md section 9 states: one run in eight near
// the term ceiling, one chaos run in eight at it and no rejoin run, half the runs sidecars.
// Kills chooseStart's `k == 1` turned into `k != 1` (most chaos runs would start at the
// ceiling, where L1 is not checked).
func TestStartRates(t *testing.T) {
	const n = 400
	for _, scenario := range []Scenario{ScenarioChaos, ScenarioRejoin} {
		seen := map[Extreme]int{}
		sidecars := 0
		for seed := uint64(1); seed <= n; seed++ {
			o, cfg, err := CampaignOptions{Profile: dledger.ProfileLAN, Scenario: string(scenario)}.OptionsFor(seed).withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			s := newSim(o, cfg)
			seen[s.extreme]++
			if s.sidecar {
				sidecars++
			}
		}
		// Binomial(400, 1/8): mean 50, sd 6.6; (400, 1/2): mean 200, sd 10.
		in := func(got, lo, hi int) bool { return got >= lo && got <= hi }
		wantAt := [2]int{20, 80}
		if scenario == ScenarioRejoin {
			wantAt = [2]int{0, 0}
		}
		if !in(seen[ExtremeNearCeiling], 20, 80) || !in(seen[ExtremeAtCeiling], wantAt[0], wantAt[1]) || !in(sidecars, 150, 250) {
			t.Errorf("%s, %d seeds: near ceiling %d (want 20-80), at ceiling %d (want %d-%d), sidecars %d (want 150-250)",
				scenario, n, seen[ExtremeNearCeiling], seen[ExtremeAtCeiling], wantAt[0], wantAt[1], sidecars)
		}
	}
}

// In a sidecar run a member's ledger is reported at once when it first starts (the group comes
// up with its storage), and only later after a restart (docs/protocol.md section 9). Kills
// startMember's `m.inc > 0` turned into `>=` or `<=`.
func TestSidecarReportsLaterOnlyAfterARestart(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		o, cfg, err := CampaignOptions{Profile: dledger.ProfileLAN, Scenario: string(ScenarioChaos)}.OptionsFor(seed).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		s := newSim(o, cfg)
		if !s.sidecar {
			continue
		}
		m := s.members[0]
		if err := s.startMember(m); err != nil {
			t.Fatal(err)
		}
		if m.unreported {
			t.Fatalf("seed %d: a sidecar member's first start leaves its ledger unreported", seed)
		}
		s.crash(m)
		s.restart(m)
		if !m.unreported {
			t.Fatalf("seed %d: a restarted sidecar member's ledger is reported at once", seed)
		}
		return
	}
	t.Fatal("no sidecar run among seeds 1-50")
}
