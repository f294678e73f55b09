package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newProcGroup prepares n real members on loopback (not started), with extra server flags,
// and kills whatever is left when the test ends.
func newProcGroup(t *testing.T, n int, extra ...string) *procGroup {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	dir := t.TempDir()
	g := &procGroup{t: t, bin: buildBinary(t, dir), procs: make([]*exec.Cmd, n), extra: extra}
	ports := loopbackPorts(t, 2*n)
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, fmt.Sprintf("n%d-127.0.0.1:%d", i, ports[i]))
		g.dirs = append(g.dirs, filepath.Join(dir, fmt.Sprintf("n%d", i)))
		g.https = append(g.https, fmt.Sprintf("127.0.0.1:%d", ports[n+i]))
		g.logs = append(g.logs, filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
	}
	g.peers = strings.Join(parts, ";")
	g.keepLogsOnFailure()
	t.Cleanup(func() {
		for i, p := range g.procs {
			if p != nil {
				g.kill9(i)
			}
		}
	})
	return g
}

// runOnce runs the binary with args to its end and returns its exit code and output.
func runOnce(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within 30 s: %s", args, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// A second process on a running member's data dir is refused at once (the durable vote would
// be void if two members shared it), and so is another member's data dir after a stop.
func TestRealProcessDataDirIsLockedAndOwned(t *testing.T) {
	g := newProcGroup(t, 3)
	g.start(0)
	if _, err := g.status(0); err != nil { // wait until n0 serves (it holds the lock from New on)
		deadline := time.Now().Add(30 * time.Second)
		for ; err != nil && time.Now().Before(deadline); _, err = g.status(0) {
			time.Sleep(20 * time.Millisecond) // polling interval
		}
		if err != nil {
			t.Fatalf("n0 never served: %v", err)
		}
	}
	code, out := runOnce(t, g.bin, "server", "--group", "proc", "--id", "n0", "--peers", g.peers,
		"--data-dir", g.dirs[0], "--http", "off")
	if code != 1 || !strings.Contains(out, "in use by another") || !strings.Contains(out, g.dirs[0]) {
		t.Fatalf("second member on n0's data dir: exit %d, %q; want exit 1 naming the dir in use", code, out)
	}
	if _, err := g.status(0); err != nil {
		t.Fatalf("n0 was disturbed by the refused second process: %v", err)
	}
	g.kill9(0) // kill -9: the lock goes with the process, no clean-up needed
	code, out = runOnce(t, g.bin, "server", "--group", "proc", "--id", "n1", "--peers", g.peers,
		"--data-dir", g.dirs[0], "--http", "off")
	if code != 1 || !strings.Contains(out, "n0") || !strings.Contains(out, "n1") {
		t.Fatalf("n1 on n0's data dir: exit %d, %q; want exit 1 naming both members", code, out)
	}
	g.start(0) // n0 itself starts again on its own dir at once
	deadline := time.Now().Add(30 * time.Second)
	for _, err := g.status(0); err != nil; _, err = g.status(0) {
		if g.procs[0].ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("n0 did not restart on its own data dir after kill -9: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
