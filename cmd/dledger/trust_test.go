package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/adminclient"
)

// newProcGroup prepares n real members on loopback (not started), with extra server flags,
// and kills whatever is left when the test ends.
func newProcGroup(t *testing.T, n int, extra ...string) *procGroup {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	dir := t.TempDir()
	g := &procGroup{t: t, bin: buildBinary(t, dir), procs: make([]*exec.Cmd, n), extra: extra,
		keyFile: writeGroupKey(t, dir)}
	ports := dledgertest.FreePorts(t, 2*n)
	g.peers = dledgertest.PeersString(ports[:n])
	for i := 0; i < n; i++ {
		g.dirs = append(g.dirs, filepath.Join(dir, fmt.Sprintf("n%d", i)))
		g.https = append(g.https, fmt.Sprintf("127.0.0.1:%d", ports[n+i]))
		g.logs = append(g.logs, filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
	}
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
		"--data-dir", g.dirs[0], "--http", "off", "--key-file", g.keyFile)
	if code != 1 || !strings.Contains(out, "in use by another") || !strings.Contains(out, g.dirs[0]) {
		t.Fatalf("second member on n0's data dir: exit %d, %q; want exit 1 naming the dir in use", code, out)
	}
	if _, err := g.status(0); err != nil {
		t.Fatalf("n0 was disturbed by the refused second process: %v", err)
	}
	g.kill9(0) // kill -9: the lock goes with the process, no clean-up needed
	code, out = runOnce(t, g.bin, "server", "--group", "proc", "--id", "n1", "--peers", g.peers,
		"--data-dir", g.dirs[0], "--http", "off", "--key-file", g.keyFile)
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

// put sends a PUT with a JSON body to a member's admin API.
func put(t *testing.T, addr, path, body string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", adminclient.New(addr).URL(path), strings.NewReader(body))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT %s%s %s: %d %s", addr, path, body, resp.StatusCode, b)
	}
}

// counter reads one series of a member's /metrics (-1 if unreachable or absent).
func counter(addr, name, label, value string) float64 {
	v, ok := metricValue(addr, name+`\{[^}]*`+label+`="`+value+`"[^}]*\}`)
	if !ok {
		return -1
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// metricValue is the value of the first line of a member's /metrics that matches series, a
// regexp of what precedes the value (false if the member is unreachable or has no such line).
func metricValue(addr, series string) (string, bool) {
	resp, err := (&http.Client{Timeout: time.Second}).Get(adminclient.New(addr).URL("/metrics"))
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

// Issue 12 item 1 on real processes: ledgers (5,100), (5,100), (5,50). The up-to-date follower
// is killed and restarted, and its application has not reported the ledger yet; then the leader
// is killed. Voting as if its ledger were empty, the restarted member would elect the stale n2
// and lose entries 51-100. It abstains instead (n2 is refused REJECT_LEDGER_UNKNOWN and never
// leads), and once its ledger is reported it is elected itself.
func TestRealProcessSidecarRestartAbstainsUntilReported(t *testing.T) {
	g := newProcGroup(t, 3, "--ledger", "sidecar")
	ledgers := []string{`{"endTerm":5,"endIndex":100}`, `{"endTerm":5,"endIndex":100}`, `{"endTerm":5,"endIndex":50}`}
	const limit = 30 * time.Second // generous: CI is a busy 2-core machine
	awaitServing := func(i int) adminclient.StatusJSON {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			st, err := g.status(i)
			if err == nil {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("n%d never served: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}
	for i := range 3 {
		g.start(i)
	}
	for i := range 3 {
		if st := awaitServing(i); !st.Abstaining || st.LedgerMode != "sidecar" {
			t.Fatalf("n%d before its report: %+v, want abstaining", i, st)
		}
		put(t, g.https[i], "/v1/ledger", ledgers[i])
	}
	leader, _ := g.awaitLeader(limit)
	if leader == "n2" {
		t.Fatalf("the stale n2 was elected")
	}
	x := map[string]int{"n0": 1, "n1": 0}[leader] // the other up-to-date member
	g.kill9(x)
	g.start(x) // restarted; its application has not reported the ledger yet
	if st := awaitServing(x); !st.Abstaining {
		t.Fatalf("restarted n%d does not abstain: %+v", x, st)
	}
	var lidx int
	fmt.Sscanf(leader, "n%d", &lidx)
	g.kill9(lidx)

	// n2 campaigns; each of its rounds is refused by the abstaining member. Watch several.
	deadline := time.Now().Add(limit)
	for counter(g.https[2], "dledger_vote_responses_total", "result", "REJECT_LEDGER_UNKNOWN") < 3 {
		if st, err := g.status(2); err == nil && st.Role == "LEADER" {
			t.Fatalf("the stale n2 leads term %d: entries 51-100 would be lost", st.Term)
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 was not refused REJECT_LEDGER_UNKNOWN three times within %v", limit)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if st, _ := g.status(2); st.Role == "LEADER" {
		t.Fatalf("the stale n2 leads")
	}
	put(t, g.https[x], "/v1/ledger", ledgers[x])
	if id, _ := g.awaitLeader(limit); id != fmt.Sprintf("n%d", x) {
		t.Fatalf("after the report %s leads, want n%d (the only up-to-date member left)", id, x)
	}
}
