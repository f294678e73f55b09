package memberstate

import (
	"testing"
)

// TestJournalFlushKeepsItsBuffers: a Save's batch is encoded into the buffer the journal's last
// flush used, and its records go in the array of the batch flushed before it, so that a Save
// allocates only its batch (and the system calls' own), however many records the batches hold.
// Built from nothing, a batch's records and their encoding grew by doubling: some 500 bytes of
// garbage a Save in a mass election's batches, 4-5 allocations a lone Save.
func TestJournalFlushKeepsItsBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not kept under the race detector")
	}
	j := mustJournal(t, t.TempDir())
	defer j.Close()
	s := mustMember(t, j, "g1", "n0")
	term := int64(0)
	save := func() {
		term++
		if err := s.Save(Durable{Term: term, VoteFor: "n0"}); err != nil {
			t.Fatal(err)
		}
	}
	save() // the first flush makes the buffers
	save()
	got := testing.AllocsPerRun(50, save)
	t.Logf("%.1f allocations a Save", got)
	if got > 2 {
		t.Fatalf("a lone Save allocated %.1f times, want at most 2 (its batch; the buffers are kept)", got)
	}
}
