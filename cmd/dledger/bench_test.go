package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The CLI side of `dledger bench failover`: flags, exit codes, the summary line. The harness's
// own tests are in cmd/internal/harness.

// TestBenchFailoverSmoke runs the real harness end to end: one crash trial on a 3-member group
// of real processes. It checks that the harness works (exit 0, a well-formed summary), never
// how fast the failover was: timing belongs to the benchmark, not to tests on a busy machine.
func TestBenchFailoverSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-member group as real processes")
	}
	bin := buildBinary(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "failover", "--members", "3", "--trials", "1",
		"--scenario", "crash", "--profile", "lan", "--binary", bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench failover: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	fields, err := parseSummary(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, stdout.String())
	}
	for k, want := range map[string]string{"scenario": "crash", "members": "3", "profile": "lan",
		"trials": "1", "detect_ms": "600", "failed": "0"} {
		if fields[k] != want {
			t.Errorf("summary %s=%q, want %q", k, fields[k], want)
		}
	}
	if !strings.Contains(stdout.String(), "trial 1/1:") {
		t.Errorf("no progress line for the trial:\n%s", stdout.String())
	}
	// The phases come from the members' log lines (dledger's Event* messages): a number here
	// means the benchmark still finds them, with the fields it matches, in a real member's log.
	for _, k := range []string{"mean_detect_phase_ms", "mean_elect_phase_ms", "mean_spread_phase_ms"} {
		if v, err := strconv.ParseFloat(fields[k], 64); err != nil || math.IsNaN(v) {
			t.Errorf("summary %s=%q: want a number (the members' logs no longer split the trial into phases)", k, fields[k])
		}
	}
}

// parseSummary splits `bench: k=v k=v ...` and checks the fields scripts rely on.
func parseSummary(line string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(line, "bench: ")
	if !ok {
		return nil, fmt.Errorf("last line is not a summary: %q", line)
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("summary field %q is not k=v", f)
		}
		fields[k] = v
	}
	var prev float64
	for _, k := range []string{"p50_ms", "p90_ms", "p99_ms", "max_ms"} {
		v, err := strconv.ParseFloat(fields[k], 64)
		if err != nil || v <= 0 || v < prev {
			return nil, fmt.Errorf("summary %s=%q: want a positive number, not below the previous percentile", k, fields[k])
		}
		prev = v
	}
	return fields, nil
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"failover", "--members", "2"},
		{"failover", "--members", "x"},
		{"failover", "--trials", "0"},
		{"failover", "--scenario", "partition"},
		{"failover", "--profile", "wan"},
		{"failover", "--poll", "50ms"},
		{"failover", "--binary", "/nonexistent/dledger"},
		{"failover", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench"}, args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || msg == "" || strings.Contains(msg, "\n") {
			t.Errorf("bench %v: exit %d, stderr %q; want exit 2 and one error line", args, code, msg)
		}
	}
}

// TestBenchMovedToLab: the old spellings of the lab's benchmarks print one line naming the new
// command and exit 2, whatever flags follow.
func TestBenchMovedToLab(t *testing.T) {
	for _, name := range []string{"calm", "compare"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"bench", name, "--scenario", "all"}, &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "dledger-lab "+name) {
			t.Errorf("bench %s: exit %d, stderr %q; want exit 2 and one line naming dledger-lab %s", name, code, msg, name)
		}
	}
}
