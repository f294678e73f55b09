package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server"
)

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

func st(self, role string, term int64, leader string) server.StatusJSON {
	return server.StatusJSON{SelfID: self, Role: role, Term: term, LeaderID: leader}
}

// The tracker decides what the benchmark reports: when a quorum first agrees on a new leader,
// which later leaders count as needless changes, and two leaders in one term.
func TestBenchTracker(t *testing.T) {
	at := time.Unix(100, 0)
	obs := func(i int, s server.StatusJSON) observation { return observation{idx: i, at: at, st: s} }
	tr := newTracker(5, leaderKey{"n0", 3})
	steps := []struct {
		o    observation
		want bool
	}{
		{obs(1, st("n1", "FOLLOWER", 3, "n0")), false}, // still the failed leader: not new
		{obs(1, st("n1", "LEADER", 4, "n1")), false},
		{obs(2, st("n2", "FOLLOWER", 4, "n1")), false},
		{observation{idx: 3, err: errDeadline}, false}, // an error counts for nobody
		{obs(3, st("n3", "FOLLOWER", 4, "n1")), true},  // 3 of 5 agree
		{obs(4, st("n4", "FOLLOWER", 4, "n1")), false}, // only the first agreement is news
		{obs(2, st("n2", "LEADER", 5, "n2")), false},   // a needless change
	}
	for i, s := range steps {
		if got := tr.observe(s.o); got != s.want {
			t.Fatalf("step %d: observe = %v, want %v", i, got, s.want)
		}
	}
	if tr.converged != (leaderKey{"n1", 4}) || len(tr.seen) != 2 || tr.violation != "" {
		t.Fatalf("converged %v, seen %v, violation %q", tr.converged, tr.seen, tr.violation)
	}
	tr.observe(obs(4, st("n4", "FOLLOWER", 5, "n3")))
	if tr.violation == "" {
		t.Fatal("two leaders in term 5 not reported")
	}
}

func TestBenchUnanimous(t *testing.T) {
	latest := map[int]server.StatusJSON{0: st("n0", "LEADER", 2, "n0"), 1: st("n1", "FOLLOWER", 2, "n0")}
	if _, ok := unanimous(latest, 3); ok {
		t.Fatal("unanimous with a member missing")
	}
	latest[2] = st("n2", "CANDIDATE", 2, "")
	if _, ok := unanimous(latest, 3); ok {
		t.Fatal("unanimous with a candidate")
	}
	latest[2] = st("n2", "FOLLOWER", 2, "n0")
	if k, ok := unanimous(latest, 3); !ok || k != (leaderKey{"n0", 2}) {
		t.Fatalf("unanimous = %v %v, want n0@2", k, ok)
	}
}

func TestBenchPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 20; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{0: 1, 50: 10, 90: 18, 99: 20, 100: 20} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
}

func TestBenchAddSample(t *testing.T) {
	m := map[string]float64{}
	addSample(`dledger_elections_total{group="g",result="PASSED",self_id="n1"} 2`, m)
	addSample(`dledger_elections_total{group="g",result="PASSED",self_id="n2"} 1`, m)
	if m["PASSED"] != 3 {
		t.Fatalf("PASSED = %v, want 3", m["PASSED"])
	}
}
