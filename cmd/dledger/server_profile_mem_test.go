package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestSampleMemoryLines: DLEDGERPPROF's memory file has a header, one line per sample with
// every column, the process's RSS and heap non-zero, and a last "peak" line that is each
// column's largest value. A sampler that dropped a column, read no metric or lost the peak
// fails it.
func TestSampleMemoryLines(t *testing.T) {
	done := make(chan struct{})
	close(done) // one sample, then the peak line
	var b bytes.Buffer
	if err := sampleMemory(&b, done); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header, one sample and the peak line, got %d lines:\n%s", len(lines), b.String())
	}
	header, sample, peak := strings.Split(lines[0], "\t"), strings.Split(lines[1], "\t"), strings.Split(lines[2], "\t")
	if len(header) != 2+len(memColumns) || len(sample) != len(header) || len(peak) != len(header) || peak[0] != "peak" {
		t.Fatalf("columns: header %d, sample %d, peak %d (first %q)", len(header), len(sample), len(peak), peak[0])
	}
	for i, name := range header[1:] {
		v, err := strconv.ParseUint(sample[i+1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch name {
		case "rss", "objects", "total", "stacks", "goroutines", "goal":
			if v == 0 {
				t.Errorf("%s reads 0", name)
			}
		}
		if sample[i+1] != peak[i+1] {
			t.Errorf("%s: one sample %s, peak %s", name, sample[i+1], peak[i+1])
		}
	}
}

// TestParseProfileEnv: DLEDGERPPROF's DIR,SECONDS and the optional FROM (a heap profile at FROM
// seconds, the base of the window's allocations); a FROM outside (0, SECONDS) or anything
// unreadable is refused (the server then does not profile).
func TestParseProfileEnv(t *testing.T) {
	for _, c := range []struct {
		v          string
		dir        string
		secs, from int
		ok         bool
	}{
		{"/tmp/p,40", "/tmp/p", 40, 0, true},
		{"/tmp/p,40,25", "/tmp/p", 40, 25, true},
		{"/tmp/p,40,40", "", 0, 0, false},
		{"/tmp/p,40,0", "", 0, 0, false},
		{"/tmp/p,40,x", "", 0, 0, false},
		{"/tmp/p,0", "", 0, 0, false},
		{",40", "", 0, 0, false},
		{"/tmp/p", "", 0, 0, false},
	} {
		dir, secs, from, err := parseProfileEnv(c.v)
		if (err == nil) != c.ok || c.ok && (dir != c.dir || secs != c.secs || from != c.from) {
			t.Errorf("%q: %q %d %d %v, want %q %d %d ok=%v", c.v, dir, secs, from, err, c.dir, c.secs, c.from, c.ok)
		}
	}
}
