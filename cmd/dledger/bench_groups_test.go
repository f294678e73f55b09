package main

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchGroupsSmoke runs `dledger bench groups` end to end on three real host processes of
// three groups, with short windows. It checks that the benchmark works (exit 0, one summary
// line with every measure a number and no group's term moved by the crash), never how fast.
func TestBenchGroupsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three host processes")
	}
	bin := buildBinary(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "groups", "--groups", "3", "--idle", "1s", "--rejoin", "1s", "--binary", bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench groups: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var summary string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "bench-groups: groups=") {
			if summary != "" {
				t.Fatalf("two summaries for one run:\n%s", stdout.String())
			}
			summary = l
		}
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(summary, "bench-groups:")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("summary field %q is not k=v: %q", f, summary)
		}
		fields[k] = v
	}
	for _, k := range []string{"idle_cpu_pct", "rss_mib_per_host", "cold_p99_ms", "crash_p50_ms", "crash_p99_ms",
		"balance_max_dev_pct", "balance_rejoin_max_dev_pct"} {
		if v, err := strconv.ParseFloat(fields[k], 64); err != nil || math.IsNaN(v) || v < 0 {
			t.Errorf("summary %s=%q: want a number", k, fields[k])
		}
	}
	if fields["groups"] != "3" || fields["other_term_changes"] != "0" || fields["crash_groups"] == "0" {
		t.Errorf("summary %q", summary)
	}
}

func TestBenchGroupsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--groups", "0"},
		{"--runs", "0"},
		{"--idle", "10ms"},
		{"--profile", "wan"},
		{"--log-level", "warn"},
		{"--binary", "/nonexistent/dledger"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench", "groups"}, args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || msg == "" || strings.Contains(msg, "\n") {
			t.Errorf("bench groups %v: exit %d, stderr %q; want exit 2 and one error line", args, code, msg)
		}
	}
}
