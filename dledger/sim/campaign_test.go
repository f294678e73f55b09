package sim

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// testDuration is the virtual time per seed in tests: the CLI default, or 6 detection windows
// (still one or two fault/heal cycles) under the race detector.
func testDuration(profile string) time.Duration {
	cfg, _ := dledger.Profile(profile)
	if raceEnabled {
		return 6 * cfg.DetectionWindow()
	}
	return DefaultDuration(cfg)
}

// TestCampaign is a moderate campaign that must find nothing: 100 seeds per profile, members
// alternating 3 and 5, one seed in four running the rejoin scenario (L2). Bigger campaigns
// belong to the CLI: dledger sim --seeds 1000. Under the race detector 20 seeds per profile
// still check every invariant (7 of them run the rejoin scenario); the breadth comes from the
// plain run and from CI's 1000-seed CLI campaign, which is not slowed 30 times.
func TestCampaign(t *testing.T) {
	seeds := 100
	if testing.Short() || raceEnabled {
		seeds = 20
	}
	for _, profile := range dledger.Profiles() {
		t.Run(profile, func(t *testing.T) {
			sum, err := Campaign(CampaignOptions{Seeds: seeds, SeedStart: 1, Profile: profile, Scenario: Mixed,
				Duration: testDuration(profile),
				OnResult: func(r Result) {
					if r.Violation != nil {
						t.Error(r.Report())
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Seeds != seeds || sum.Elections < seeds {
				t.Fatalf("campaign ran %d seeds with %d elections", sum.Seeds, sum.Elections)
			}
			t.Log(sum.Line())
		})
	}
}

// TestSevenMembers: the largest group also holds up.
func TestSevenMembers(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		r := mustRun(t, Options{Seed: seed, Members: 7, Duration: testDuration(dledger.ProfileLAN)})
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
	}
}
