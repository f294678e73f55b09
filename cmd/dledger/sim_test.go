package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger/sim"
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

// With --trace and several seeds, the trace and the progress lines share one writer: every
// seed's trace must be there, in order, and (under -race) nothing may write concurrently.
func TestSimTraceOfSeveralSeeds(t *testing.T) {
	var out, errb bytes.Buffer
	// 120 seeds: a progress line is printed after the 100th, while traces are being written.
	code := run([]string{"sim", "--seeds", "120", "--seed-start", "5", "--members", "3", "--profile", "lan",
		"--scenario", "chaos", "--duration", "1s", "--trace"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	s := out.String()
	last := strings.LastIndex(s, "\n"+"sim: seeds=120 ")
	if last < 0 {
		t.Fatalf("no summary line for 120 seeds:\n%s", firstLines(s, 5))
	}
	if !strings.Contains(s, "sim: progress seeds=100/120") {
		t.Fatal("no progress line after 100 seeds")
	}
	for seed := 5; seed < 125; seed++ {
		head := fmt.Sprintf("=== seed %d members=3 profile=lan scenario=chaos\n", seed)
		i := strings.Index(s, head)
		if i < 0 || !strings.HasPrefix(s[i+len(head):], "   0.000000s ") { // the seed's first event
			t.Fatalf("no trace for seed %d:\n%s", seed, firstLines(s, 5))
		}
	}
}

// --hashes prints one line per seed, in seed order whatever the worker count, and the same
// lines for the same seeds: what a refactoring that claims to change no run is checked with.
func TestSimHashesOnePerSeedAndReplayed(t *testing.T) {
	lines := func(workers string) []string {
		var out, errb bytes.Buffer
		if code := run([]string{"sim", "--seeds", "6", "--seed-start", "3", "--hashes", "--workers", workers}, &out, &errb); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "seed=") {
				got = append(got, l)
			}
		}
		return got
	}
	one, two := lines("1"), lines("2")
	if len(one) != 6 {
		t.Fatalf("%d hash lines for 6 seeds:\n%s", len(one), strings.Join(one, "\n"))
	}
	line := regexp.MustCompile(`^seed=(\d+) hash=[0-9a-f]{16} elections=\d+ steps=[1-9]\d*$`)
	for i, l := range one {
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] != fmt.Sprint(3+i) {
			t.Fatalf("line %d is %q, want seed %d in the form %s", i, l, 3+i, line)
		}
		if two[i] != l {
			t.Fatalf("seed %d: %q with one worker, %q with two", 3+i, l, two[i])
		}
	}
}

// TestSimFastProfile: --profile fast reaches the runs (the same seeds with lan run other
// events), passes its seeds, and "mixed" never picks it (the CI campaign's trace hashes stay
// those of lan and dledger); a profile that is not one is refused with the list.
func TestSimFastProfile(t *testing.T) {
	hashes := func(profile string) []string {
		var out, errb bytes.Buffer
		if code := run([]string{"sim", "--seeds", "4", "--seed-start", "1", "--members", "mixed", "--profile", profile,
			"--scenario", "mixed", "--duration", "6s", "--hashes", "--workers", "1"}, &out, &errb); code != 0 {
			t.Fatalf("--profile %s: exit %d\n%s%s", profile, code, out.String(), errb.String())
		}
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "seed=") {
				got = append(got, l)
			}
		}
		if len(got) != 4 {
			t.Fatalf("--profile %s: %d hash lines for 4 seeds", profile, len(got))
		}
		return got
	}
	fast, lan := hashes("fast"), hashes("lan")
	for i := range fast {
		if fast[i] == lan[i] {
			t.Errorf("seed %d runs the same events with fast as with lan: %s", i+1, fast[i])
		}
	}
	for seed := uint64(1); seed <= 64; seed++ {
		if p := (sim.CampaignOptions{Profile: sim.Mixed}).OptionsFor(seed).Profile; p != "lan" && p != "dledger" {
			t.Fatalf("mixed picks profile %q for seed %d", p, seed)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--seeds", "1", "--profile", "wan"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), `--profile must be lan, dledger, fast or mixed (got "wan")`) {
		t.Fatalf("--profile wan: exit %d, stderr %q", code, errb.String())
	}
}
