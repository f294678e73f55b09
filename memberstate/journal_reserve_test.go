package memberstate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestJournalReserveSizesOnceForTheMembers: a journal reserved for n members has both files
// sized for exactly n (not the doubling's next power of two: 6 MiB for 5,000 members, where
// adding them one by one grows to 8), and adding those n grows neither file; the next member
// past them still grows it.
func TestJournalReserveSizesOnceForTheMembers(t *testing.T) {
	const n = 5000
	sizes := func(dir string) [2]int64 {
		t.Helper()
		var out [2]int64
		for i, name := range journalNames {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = fi.Size()
		}
		return out
	}
	add := func(j *Journal, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := j.Member(Owner{Group: fmt.Sprintf("g%d", i), SelfID: "n0"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	grown := t.TempDir()
	g, err := OpenJournal(grown)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	add(g, 0, n)

	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Reserve(n); err != nil {
		t.Fatal(err)
	}
	want := j.needSize(n)
	if got := sizes(dir); got != [2]int64{want, want} {
		t.Fatalf("reserved for %d: files of %v bytes, want %d", n, got, want)
	}
	if grownTo := sizes(grown)[0]; grownTo <= want {
		t.Fatalf("grown one by one to %d bytes, reserved %d: the test shows nothing", grownTo, want)
	}
	add(j, 0, n)
	if got := sizes(dir); got != [2]int64{want, want} {
		t.Fatalf("after adding the %d reserved for: files of %v bytes, want %d", n, got, want)
	}
	if err := j.Reserve(10); err != nil || sizes(dir)[0] != want {
		t.Fatalf("a smaller reserve changed the files (%v, %d bytes)", err, sizes(dir)[0])
	}
	add(j, n, n+1024) // past the reserve: grows as before
	if got := sizes(dir)[0]; got <= want {
		t.Fatalf("%d members past the reserve: files of %d bytes, want more than %d", 1024, got, want)
	}
}

// TestJournalGrowNeverShrinks: a grow sized before it waited for the files (a member's add,
// sized from the journal as it was) that finds them grown past it meanwhile (Reserve) leaves
// the size alone. Fails if it sets the smaller size: the next grow would then write zeros
// from there, over the records past it, in both files.
func TestJournalGrowNeverShrinks(t *testing.T) {
	j, err := OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Reserve(5000); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	big := j.size
	err = j.grow(big / 4) // a grow sized for fewer members, run after the reserve
	after := j.size
	j.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if after != big {
		t.Fatalf("size %d after a smaller grow, want %d kept", after, big)
	}
}
