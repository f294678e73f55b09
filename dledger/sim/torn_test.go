package sim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger"
)

// TestTornWritesMeetCrashes: chaos runs tear some vote-store writes (a Save that fails after
// writing) and crash members that hold one, and the crash sometimes keeps the write and
// sometimes loses it, with every invariant holding. Without this the torn-write fault could be
// wired to nothing and every campaign would still pass.
func TestTornWritesMeetCrashes(t *testing.T) {
	kept, lost, seeds := 0, 0, uint64(0)
	for seed := uint64(1); seed <= 120 && (kept == 0 || lost == 0); seed++ {
		seeds = seed
		var tr bytes.Buffer
		r := mustRun(t, Options{Seed: seed, Members: []int{3, 5}[seed%2], Duration: testDuration(dledger.ProfileLAN), Trace: &tr})
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
		kept += strings.Count(tr.String(), "and kept it: true")
		lost += strings.Count(tr.String(), "and kept it: false")
	}
	if kept == 0 || lost == 0 {
		t.Fatalf("in %d seeds, crashes kept %d torn writes and lost %d; want some of each", seeds, kept, lost)
	}
	t.Logf("crashes kept %d torn writes and lost %d (seeds 1-%d)", kept, lost, seeds)
}
