package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// TestSameSeedSameRun: a seed replays bit for bit. The trace hash covers every message,
// answer, timeout, role event and fault, so any divergence shows.
func TestSameSeedSameRun(t *testing.T) {
	for _, o := range []Options{
		{Seed: 11, Members: 3, Profile: dledger.ProfileLAN},
		{Seed: 12, Members: 5, Profile: dledger.ProfileLAN},
		{Seed: 13, Members: 5, Profile: dledger.ProfileDLedger, Duration: time.Minute},
		{Seed: 14, Members: 7, Profile: dledger.ProfileLAN},
		{Seed: 15, Members: 5, Profile: dledger.ProfileLAN, Scenario: ScenarioRejoin},
	} {
		if raceEnabled {
			o.Duration = testDuration(o.Profile) // shorter runs replay just as exactly
		}
		a, b := mustRun(t, o), mustRun(t, o)
		if a.TraceHash != b.TraceHash || a.Steps != b.Steps || a.SimTime != b.SimTime || a.Elections != b.Elections {
			t.Fatalf("seed %d ran differently twice: %+v vs %+v", o.Seed, a, b)
		}
		if a.Violation != nil {
			t.Fatalf("seed %d: %s", o.Seed, a.Report())
		}
		o.Seed++
		if c := mustRun(t, o); c.TraceHash == a.TraceHash {
			t.Fatalf("seeds %d and %d have the same trace hash", o.Seed-1, o.Seed)
		}
	}
}

// TestSameSeedSameTraceText compares the full printed trace, not only its hash.
func TestSameSeedSameTraceText(t *testing.T) {
	var x, y bytes.Buffer
	d := testDuration(dledger.ProfileLAN)
	mustRun(t, Options{Seed: 21, Members: 5, Duration: d, Trace: &x})
	mustRun(t, Options{Seed: 21, Members: 5, Duration: d, Trace: &y})
	if x.Len() == 0 || !bytes.Equal(x.Bytes(), y.Bytes()) {
		t.Fatalf("full traces differ (%d and %d bytes)", x.Len(), y.Len())
	}
	for _, want := range []string{"PHASE    fault", "PHASE    heal", "LEADER", "STABLE"} {
		if !strings.Contains(x.String(), want) {
			t.Errorf("the trace never shows %q", want)
		}
	}
}

// TestCampaignOrderIsIndependentOfWorkers: parallel workers change nothing but the wall time.
// It is the one test where the race detector matters (Campaign's workers are the only
// concurrency), and there shorter runs exercise the workers just as well.
func TestCampaignOrderIsIndependentOfWorkers(t *testing.T) {
	hashes := func(workers int) []uint64 {
		var hs []uint64
		_, err := Campaign(CampaignOptions{Seeds: 12, SeedStart: 40, Profile: dledger.ProfileLAN, Workers: workers,
			Duration: testDuration(dledger.ProfileLAN),
			OnResult: func(r Result) { hs = append(hs, r.Seed, r.TraceHash) }})
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	one, two := hashes(1), hashes(2)
	for i := range one {
		if one[i] != two[i] {
			t.Fatalf("1 worker: %v\n2 workers: %v", one, two)
		}
	}
}

func TestOptionsAreValidated(t *testing.T) {
	for _, o := range []Options{
		{Members: 2}, {Members: 8}, {Profile: "wan"}, {Scenario: "storm"}, {Broken: "all"}, {Duration: -time.Second},
	} {
		if _, err := Run(o); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
	if _, err := Campaign(CampaignOptions{Seeds: 0}); err == nil {
		t.Error("a campaign of 0 seeds accepted")
	}
}

// TestBoundsAreStated pins the documented L1 bound values (docs/internals.md and liveness.go).
func TestBoundsAreStated(t *testing.T) {
	lan, _ := dledger.Profile(dledger.ProfileLAN)
	dl, _ := dledger.Profile(dledger.ProfileDLedger)
	if got := L1Bound(lan); got != 11700*time.Millisecond {
		t.Errorf("L1Bound(lan) = %v", got)
	}
	if got := L1Bound(dl); got != 56*time.Second {
		t.Errorf("L1Bound(dledger) = %v", got)
	}
	if DefaultDuration(lan) != time.Minute || DefaultDuration(dl) != 10*time.Minute {
		t.Errorf("default durations %v, %v", DefaultDuration(lan), DefaultDuration(dl))
	}
}

func mustRun(t *testing.T, o Options) Result {
	t.Helper()
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
