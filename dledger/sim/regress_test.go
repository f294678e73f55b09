package sim

import (
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// TestRejoinScenario is L2: with a stable leader and no other fault, a follower cut off from
// every member and rejoining causes no leader change.
func TestRejoinScenario(t *testing.T) {
	seeds := 100
	if testing.Short() || raceEnabled {
		seeds = 20
	}
	_, err := Campaign(CampaignOptions{Seeds: seeds, SeedStart: 1000, Profile: Mixed, Scenario: string(ScenarioRejoin),
		OnResult: func(r Result) {
			if r.Violation != nil {
				t.Error(r.Report())
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRegressionFollowerForgetsLostRound: these seeds failed L2 when becomeFollower kept a
// lost round's WAIT_TO_VOTE_NEXT. A follower cut off later started the next term on its first
// candidate pass; on rejoining, its EXPIRED_TERM answer deposed the healthy leader. DLedger's
// changeRoleToFollower resets lastParseResult to WAIT_TO_REVOTE; so does ours now.
func TestRegressionFollowerForgetsLostRound(t *testing.T) {
	for _, o := range []Options{
		{Seed: 16, Members: 3, Profile: dledger.ProfileLAN, Scenario: ScenarioRejoin},
		{Seed: 78, Members: 3, Profile: dledger.ProfileDLedger, Scenario: ScenarioRejoin},
		{Seed: 45, Members: 5, Profile: dledger.ProfileLAN, Scenario: ScenarioRejoin},
		{Seed: 71, Members: 5, Profile: dledger.ProfileDLedger, Scenario: ScenarioRejoin},
		{Seed: 145, Members: 5, Profile: dledger.ProfileLAN, Scenario: ScenarioRejoin}, // after chaos, term 1
	} {
		if r := mustRun(t, o); r.Violation != nil {
			t.Errorf("seed %d:\n%s", o.Seed, r.Report())
		}
	}
}
