package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/adminclient"
)

// devPorts finds a base port whose next members-1 ports, and the same at +1000, are free.
func devPorts(t *testing.T, members int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := dledgertest.FreePorts(t, 1)[0]
		ok := true
		for i := 0; i < members && ok; i++ {
			for _, p := range []int{base + i, base + 1000 + i} {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					ok = false
					break
				}
				ln.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free run of ports for dev")
	return 0
}

var devRoleLineRe = regexp.MustCompile(`^\s*(\d+\.\d+)s  (n\d)  (\S+)\s+term=(\d+) leader=(\S+)`)

// `dledger dev` as a person sees it: hints that name the program as it was started, labelled
// for what they do, and that work as printed; role changes in the order they happened, a
// transfer included; and Ctrl-C stops the whole group without moving leadership around: no
// member takes over on the way out, each one's last line is its UNKNOWN at the group's term.
func TestDevPrintsInOrderAndStopsTheGroupWithoutHandOvers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t, t.TempDir())
	base := devPorts(t, 3)
	cmd := exec.Command(bin, "dev", "--base-port", strconv.Itoa(base))
	var out lockedBuffer
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once cmd.Wait returned waitErr
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	const limit = 30 * time.Second
	roleLines := func() [][]string {
		var rows [][]string
		for _, l := range strings.Split(out.String(), "\n") {
			if m := devRoleLineRe.FindStringSubmatch(l); m != nil {
				rows = append(rows, m[1:])
			}
		}
		return rows
	}
	// latest is each member's last printed line.
	latest := func() map[string][]string {
		m := map[string][]string{}
		for _, r := range roleLines() {
			m[r[1]] = r
		}
		return m
	}
	var leader, term string
	dledgertest.Eventually(t, limit, "dev to print a leader that both others follow", func() bool {
		m := latest()
		leader, term = "", ""
		for id, r := range m {
			if r[2] == "LEADER" {
				leader, term = id, r[3]
			}
		}
		n := 0
		for _, r := range m {
			if r[2] == "FOLLOWER" && r[4] == leader && r[3] == term {
				n++
			}
		}
		return leader != "" && n == 2
	})

	// The hints: labelled for what they do, naming this binary, and working as printed.
	text := out.String()
	hint := func(label string) []string {
		for _, l := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(l, label); ok {
				return strings.Fields(rest)
			}
		}
		t.Fatalf("no %q hint in:\n%s", label, text)
		return nil
	}
	status := hint("status:")
	if status[0] != bin || status[1] != "status" || len(hint("watch:")) < 2 || hint("watch:")[1] != "watch" ||
		hint("transfer:")[1] != "transfer" {
		t.Fatalf("hints do not name %s and the command each label says:\n%s", bin, text)
	}
	if o, e, code := runTool(t, status[0], status[1:]...); code != 0 {
		t.Fatalf("the status hint %q: exit %d\n%s%s", status, code, o, e)
	}

	// A transfer: several members change roles within a millisecond or two.
	to := "n1"
	if leader == "n1" {
		to = "n2"
	}
	member := &adminclient.Client{Addr: fmt.Sprintf("127.0.0.1:%d", base+1000), HTTP: &http.Client{Timeout: limit}}
	if _, err := member.Transfer(context.Background(), to); err != nil {
		t.Fatalf("transfer to %s: %v", to, err)
	}
	dledgertest.Eventually(t, limit, "dev to print "+to+" leading and both others following it", func() bool {
		m := latest()
		n := 0
		for _, r := range m {
			if r[4] == to && (r[2] == "FOLLOWER" || r[2] == "LEADER" && r[1] == to) {
				n++
			}
		}
		term = m[to][3]
		return n == 3
	})
	before := len(roleLines())

	// Ctrl-C: the group stops as it is.
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("dev exited with %v after Ctrl-C\n%s\n%s", waitErr, out.String(), errOut.String())
		}
	case <-time.After(limit):
		t.Fatalf("dev did not exit after Ctrl-C:\n%s", out.String())
	}
	rows := roleLines()
	prev := -1.0
	for _, r := range rows {
		at, _ := strconv.ParseFloat(r[0], 64)
		if at < prev {
			t.Fatalf("role changes out of time order (%.3fs after %.3fs):\n%s", at, prev, out.String())
		}
		prev = at
	}
	stopped := map[string]bool{}
	for _, r := range rows[before:] {
		if r[2] != "UNKNOWN" || r[3] != term || stopped[r[1]] {
			t.Fatalf("on Ctrl-C, %s printed %s at term %s; want only one UNKNOWN per member at term %s (no hand-over):\n%s",
				r[1], r[2], r[3], term, out.String())
		}
		stopped[r[1]] = true
	}
	if len(stopped) != 3 {
		t.Fatalf("%d members printed their stop:\n%s", len(stopped), out.String())
	}
}

// The hints name the program as a person can run it again.
func TestSelfCommand(t *testing.T) {
	exe := func(p string) func() (string, error) { return func() (string, error) { return p, nil } }
	noPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, c := range []struct {
		arg0, exe string
		look      func(string) (string, error)
		want      string
	}{
		{"/tmp/go-build123/b001/exe/dledger", "/tmp/go-build123/b001/exe/dledger", noPath, "go run ./cmd/dledger"},
		{"bin/dledger", "/src/bin/dledger", noPath, "bin/dledger"},
		{"dledger", "/bin/sh", func(string) (string, error) { return "/bin/sh", nil }, "dledger"}, // PATH finds this binary
		{"bin/dledger", "/bin/sh", func(string) (string, error) { return "/bin/true", nil }, "bin/dledger"},
	} {
		if got := selfCommand(c.arg0, exe(c.exe), c.look); got != c.want {
			t.Errorf("selfCommand(%q, %q): %q, want %q", c.arg0, c.exe, got, c.want)
		}
	}
}
