package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeWalkThrough is the README's section "A three-process cluster, step by step": its
// shell block and the sample `dledger status` table printed under it.
func readmeWalkThrough(t *testing.T) (script, sample string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## A three-process cluster, step by step\n")
	if !ok {
		t.Fatal("README has no section \"A three-process cluster, step by step\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, rest, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatal("the walk-through has no ```sh block")
	}
	script, rest, ok = strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("the walk-through's sh block is not closed")
	}
	_, rest, ok = strings.Cut(rest, "```text\n")
	if !ok {
		t.Fatal("the walk-through has no sample status table (a ```text block) after its sh block")
	}
	sample, _, ok = strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("the sample status table's block is not closed")
	}
	return script, sample
}

// statusRows splits a `dledger status` table into its rows' columns (two or more spaces apart).
func statusRows(table string) [][]string {
	var rows [][]string
	sep := regexp.MustCompile(`\s{2,}`)
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		rows = append(rows, sep.Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// The README's walk-through runs as written, on a fresh checkout (no bin/, no data/: both are
// git-ignored), and the status it prints has the shape and the term of the README's sample.
// The commands are taken from the README's text, not copied here, so a README edit that breaks
// them fails this test. The members listen on the README's fixed ports, so the group runs in a
// network namespace of its own where the machine allows one (root, unshare), and otherwise
// only when those ports are free.
func TestREADMEWalkThroughRunsVerbatim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a three-process group")
	}
	script, sample := readmeWalkThrough(t)
	lines := strings.Split(strings.TrimRight(script, "\n"), "\n")
	// The block: build, keygen, PEERS=..., the start loop, then status. The status line is
	// what a person runs (again) once the members are up; the rest runs once, in order.
	var setup, start []string
	statusLine := ""
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "PEERS="):
			setup, start = lines[:i], lines[i:]
		case strings.Contains(l, "dledger status"):
			statusLine = l
			start = start[:len(start)-1]
		}
	}
	if setup == nil || statusLine == "" || statusLine != lines[len(lines)-1] {
		t.Fatalf("the walk-through's block is not build/keygen, PEERS=, the start loop, then status:\n%s", script)
	}

	// A fresh checkout: the sources (linked), nothing else.
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case n == ".git", n == "bin", n == "data", strings.HasPrefix(n, "_readmecheck"):
		default:
			if err := os.Symlink(filepath.Join(repo, n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	bash := func(name string, arg ...string) *exec.Cmd {
		cmd := exec.Command(name, arg...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the members die with the group
		return cmd
	}
	out, err := bash("bash", "-e", "-c", strings.Join(setup, "\n")).CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through's first commands failed on a fresh checkout: %v\n%s\n--- ran:\n%s", err, out,
			strings.Join(setup, "\n"))
	}

	// Then the members, and `dledger status` until it shows a leader that both others follow
	// (a person runs it again until then; 30 s is generous on a busy 2-core machine).
	const tries = 600 // x 50 ms
	run := strings.Join(start, "\n") + fmt.Sprintf(`
for try in $(seq %d); do
  if %s > status.out 2> status.err && [ "$(grep -cE '^n[0-9] +LEADER ' status.out)" = 1 ] &&
     [ "$(grep -cE '^n[0-9] +FOLLOWER ' status.out)" = 2 ]; then
    break
  fi
  sleep 0.05
done
kill $(jobs -p) 2> /dev/null
wait
`, tries, statusLine)
	if err := os.WriteFile(filepath.Join(dir, "walk.sh"), []byte(run), 0o644); err != nil {
		t.Fatal(err)
	}
	useNetns := os.Geteuid() == 0 && exec.Command("unshare", "-n", "true").Run() == nil
	if !useNetns {
		for _, port := range []int{20911, 20912, 20913, 21911, 21912, 21913} {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Skipf("port %d is in use and no network namespace is available: %v", port, err)
			}
			ln.Close()
		}
	}
	want := statusRows(sample)
	if len(want) != 4 {
		t.Fatalf("the README's sample has %d lines, want a header and three members:\n%s", len(want), sample)
	}
	// A fresh group's first leader is elected in term 0, the README's term, unless its first vote
	// round comes to nothing (members starting at once on a busy machine), which makes it term
	// 1. So the group is started afresh at least twice and up to three times: the README's term
	// must be the one a run shows when nothing got in the way, the lowest any run shows, and at
	// least one run must show it.
	var terms []int
	matched := false
	for attempt := 0; attempt < 3 && (attempt < 2 || !matched); attempt++ {
		for i := 0; i < 3; i++ { // a fresh start: the members' data dirs, not the key
			os.RemoveAll(filepath.Join(dir, "data", fmt.Sprintf("n%d", i)))
		}
		have := runWalkThroughGroup(t, dir, bash, useNetns, want)
		term, _ := strconv.Atoi(have[1][2])
		terms = append(terms, term)
		matched = matched || have[1][2] == want[1][2]
	}
	if !matched || slices.Min(terms) != wantTerm(t, want) {
		t.Fatalf("the README's sample shows term %s; fresh runs elected their first leaders in terms %v", want[1][2], terms)
	}
}

func wantTerm(t *testing.T, want [][]string) int {
	term, err := strconv.Atoi(want[1][2])
	if err != nil {
		t.Fatalf("the README's sample term %q: %v", want[1][2], err)
	}
	return term
}

// runWalkThroughGroup runs walk.sh (the members and the status loop) in dir and checks the
// last status table against the README's sample want: header, one row per member in order, one
// leader followed by the others at the same term, empty ledgers, a heartbeat age, the address.
// It returns the table's rows.
func runWalkThroughGroup(t *testing.T, dir string, bash func(string, ...string) *exec.Cmd, useNetns bool,
	want [][]string) [][]string {
	t.Helper()
	os.Remove(filepath.Join(dir, "status.out"))
	cmd := bash("bash", "walk.sh")
	if useNetns {
		cmd = bash("unshare", "-n", "bash", "-c", "ip link set lo up && exec bash walk.sh")
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	got, _ := os.ReadFile(filepath.Join(dir, "status.out"))
	statusErr, _ := os.ReadFile(filepath.Join(dir, "status.err"))
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- last status:\n%s%s\n--- members' logs (%v):\n%s", append(a, got, statusErr, err, logs.String())...)
	}
	have := statusRows(string(got))
	if len(have) != 4 || strings.Join(have[0], " ") != strings.Join(want[0], " ") {
		fail("status does not print the README's table (header %q)", want[0])
	}
	hb := regexp.MustCompile(`^\d+ms ago$`)
	for _, rows := range [][][]string{want, have} {
		leader := ""
		for _, r := range rows[1:] {
			if r[1] == "LEADER" {
				leader = r[0]
			}
		}
		for i, r := range rows[1:] {
			id := fmt.Sprintf("n%d", i)
			if len(r) != 8 || r[0] != id || (r[1] != "LEADER" && r[1] != "FOLLOWER") || r[2] != rows[1][2] ||
				r[3] != leader || leader == "" || r[5] != "(-1,-1)" || !hb.MatchString(r[6]) ||
				r[7] != fmt.Sprintf("127.0.0.1:%d", 21911+i) {
				fail("row %q of %q is not a member of one group led by %q", r, rows, leader)
			}
		}
	}
	return have
}
