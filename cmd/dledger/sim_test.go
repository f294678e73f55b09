package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestSimReplayCommandReplays runs what a user would paste: the replay line a violation
// prints. Under the CLI's defaults (mixed members, profile and scenario) it must name every
// per-seed choice, or it replays a different run. The violation header, including the
// virtual time it happened at, must come back the same.
func TestSimReplayCommandReplays(t *testing.T) {
	var out, errb bytes.Buffer
	// Chaos only, so that the mixed default on replay would pick rejoin for some seeds.
	code := run([]string{"sim", "--seeds", "20", "--members", "3", "--profile", "lan", "--scenario", "chaos",
		"--broken", "double-vote", "--reports", "20", "--workers", "1"}, &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (violations)\n%s%s", code, out.String(), errb.String())
	}
	header := regexp.MustCompile(`(?m)^VIOLATION \S+ seed=(\d+) .*$`)
	replay := regexp.MustCompile(`(?m)^  replay: go run ./cmd/dledger (.*)$`)
	heads, replays := header.FindAllString(out.String(), -1), replay.FindAllStringSubmatch(out.String(), -1)
	if len(heads) == 0 || len(heads) != len(replays) {
		t.Fatalf("%d violation headers, %d replay lines:\n%s", len(heads), len(replays), out.String())
	}
	replayed := 0
	for i, h := range heads {
		seed := header.FindStringSubmatch(h)[1]
		if seed != "1" && seed != "16" { // seeds for which "mixed" would choose rejoin
			continue
		}
		args := strings.Fields(replays[i][1])
		var again, againErr bytes.Buffer
		run(args, &again, &againErr)
		if !strings.Contains(again.String(), h+"\n") {
			t.Errorf("seed %s: %q did not replay\n  want %s\n  got:\n%s%s", seed, replays[i][1], h,
				firstLines(again.String(), 5), againErr.String())
		}
		replayed++
	}
	if replayed == 0 {
		t.Fatalf("neither seed 1 nor 16 violated; pick seeds that do:\n%s", out.String())
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
