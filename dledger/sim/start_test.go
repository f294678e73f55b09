package sim

import (
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Some seeds start near or at the term ceiling (protocol.MaxTerm), with ledger values near
// protocol.MaxLedgerValue: S1-S5 hold there too. Near-ceiling runs never reach the ceiling and
// are checked for L1 like any run (they heal); at-ceiling runs reach it, and end when a heal
// finds no leader, since no new term can start at MaxTerm.
func TestExtremeTermsKeepSafety(t *testing.T) {
	seen := map[Extreme]int{}
	for seed := uint64(1); seed <= 400 && (seen[ExtremeNearCeiling] < 4 || seen[ExtremeAtCeiling] < 4); seed++ {
		o := CampaignOptions{Profile: dledger.ProfileLAN, Scenario: string(ScenarioChaos)}.OptionsFor(seed)
		o, cfg, err := o.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		ex := newSim(o, cfg).extreme // how the seed starts, without running it
		if ex == ExtremeNone || seen[ex] >= 4 {
			continue
		}
		seen[ex]++
		if ex == ExtremeNearCeiling {
			o.Duration = testDuration(o.Profile) // at-ceiling runs need time to get there
		}
		r := mustRun(t, o)
		if r.Violation != nil {
			t.Fatalf("seed %d (%s):\n%s", seed, r.Extreme, r.Report())
		}
		if r.MaxTerm < protocol.MaxTerm-2*ceilingMargin || r.MaxTerm > protocol.MaxTerm {
			t.Fatalf("seed %d (%s): max term %d, want within %d of MaxTerm and never above", seed, r.Extreme, r.MaxTerm, 2*ceilingMargin)
		}
		switch r.Extreme {
		case ExtremeNearCeiling:
			if r.CeilingReached || r.Heals == 0 || r.Elections == 0 {
				t.Fatalf("seed %d near the ceiling: reached=%v heals=%d elections=%d; want L1-checked heals below the ceiling",
					seed, r.CeilingReached, r.Heals, r.Elections)
			}
		case ExtremeAtCeiling:
			if !r.CeilingReached {
				t.Fatalf("seed %d at the ceiling never reached MaxTerm (max term %d)", seed, r.MaxTerm)
			}
		}
	}
	if seen[ExtremeNearCeiling] < 4 || seen[ExtremeAtCeiling] < 4 {
		t.Fatalf("extreme starts in 400 seeds: %v; want at least 4 of each", seen)
	}
}

// The sidecar-restart fault: a restarted sidecar member reports its ledger only after a delay,
// abstaining until then (REJECT_LEDGER_UNKNOWN), and S4 is checked against the true ledgers.
// Without the abstention the checker catches the stale votes (broken mode no-abstain,
// broken_test.go).
func TestSidecarRestartsReportLate(t *testing.T) {
	reports, abstained := 0, 0
	for seed := uint64(1); seed <= 60 && (reports == 0 || abstained == 0); seed++ {
		o := Options{Seed: seed, Members: []int{3, 5}[seed%2], Duration: testDuration(dledger.ProfileLAN)}
		var tr strings.Builder
		o.Trace = &tr
		r := mustRun(t, o)
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
		if !r.Sidecar {
			if strings.Contains(tr.String(), "storage reports ledger") {
				t.Fatalf("seed %d is not a sidecar run but reported a ledger late", seed)
			}
			continue
		}
		reports += strings.Count(tr.String(), "storage reports ledger")
		abstained += strings.Count(tr.String(), "=> REJECT_LEDGER_UNKNOWN")
	}
	if reports == 0 || abstained == 0 {
		t.Fatalf("sidecar runs made %d late reports and %d abstentions; want some of each", reports, abstained)
	}
	t.Logf("%d late ledger reports, %d votes refused as REJECT_LEDGER_UNKNOWN", reports, abstained)
}

// One run in four starts its members at staggered times (startDelays): the trace says when each
// starts, and the invariants, L1 included, hold as in any run.
func TestStaggeredStart(t *testing.T) {
	cfg, _ := dledger.Profile(dledger.ProfileLAN)
	staggered := 0
	for seed := uint64(1); seed <= 80; seed++ {
		var trace strings.Builder
		o := Options{Seed: seed, Members: 3 + 2*int(seed%2), Profile: dledger.ProfileLAN, Scenario: ScenarioChaos,
			Duration: 4 * cfg.DetectionWindow(), Trace: &trace}
		r := mustRun(t, o)
		if r.Violation != nil {
			t.Fatalf("seed %d:\n%s", seed, r.Report())
		}
		if !r.Staggered {
			continue
		}
		staggered++
		if !strings.Contains(trace.String(), "staggered start: n0 +") || !strings.Contains(trace.String(), "starts (staggered start)") {
			t.Fatalf("seed %d: staggered, but the trace does not say when the members start", seed)
		}
	}
	if staggered < 10 || staggered > 30 { // one in four of 80
		t.Fatalf("%d of 80 runs staggered, want about 20", staggered)
	}
}
