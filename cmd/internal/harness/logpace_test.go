package harness

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestLogPacerReadsOnceTheLogsGoQuiet: the first look reads; while the sizes grow nothing is
// read until the last read is maxLag old; once they stop growing for quietFor they are read
// once, and not again until they grow (or until the last read is maxLag old, which this
// test's quiet spells are too short to reach).
func TestLogPacerReadsOnceTheLogsGoQuiet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := logPacer{quietFor: 50 * time.Millisecond, maxLag: time.Second}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var reads []int
	look := func(ms int, sizes ...int64) {
		if p.due(at(ms), sizes) {
			reads = append(reads, ms)
		}
	}
	look(0, 10, 10)  // first look: read
	look(10, 10, 10) // nothing new
	look(20, 15, 10) // grows
	for ms := 30; ms <= 1050; ms += 10 {
		look(ms, int64(15+ms), 10) // grows at every look for a second
	}
	for ms := 1060; ms <= 1200; ms += 10 {
		look(ms, 1065, 10) // quiet from 1050 on
	}
	look(1210, 1065, 11) // grows again
	for ms := 1220; ms <= 1300; ms += 10 {
		look(ms, 1065, 11)
	}
	want := []int{0, 1000, 1100, 1260}
	if !slices.Equal(reads, want) {
		t.Fatalf("read at %v ms, want %v", reads, want)
	}
}

// TestLogFollowerSizes: a missing file is -1, a present one its size.
func TestLogFollowerSizes(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	if err := os.WriteFile(a, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewLogFollower([]string{a, b})
	if got := f.Sizes(); !slices.Equal(got, []int64{5, -1}) {
		t.Fatalf("sizes %v, want [5 -1]", got)
	}
}

// TestCPUTrailAt: the CPU of the first sample at or after the moment, the last one past the
// end, none without samples.
func TestCPUTrailAt(t *testing.T) {
	var tr cpuTrail
	if _, ok := tr.at(time.Unix(5, 0)); ok {
		t.Fatal("a trail without samples answered")
	}
	for i := 1; i <= 3; i++ {
		tr.add(time.Unix(int64(10*i), 0), time.Duration(i)*time.Second)
	}
	for _, c := range []struct {
		at   int64
		want time.Duration
	}{{5, time.Second}, {10, time.Second}, {11, 2 * time.Second}, {30, 3 * time.Second}, {99, 3 * time.Second}} {
		if got, ok := tr.at(time.Unix(c.at, 0)); !ok || got != c.want {
			t.Errorf("at(%d s) = %v, %v; want %v", c.at, got, ok, c.want)
		}
	}
}
