package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/adminclient"
)

// lockedBuffer is an io.Writer a child process and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cutProxy forwards TCP connections to target until cut: then it closes every connection and
// refuses new ones (closes them at once) until restored. It stands for a network between a
// watch client and its member that fails and heals.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close(); c.Close() }()
	io.Copy(c, up)
	c.Close()
	up.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// startChild starts cmd and returns a function that waits (up to limit) for its exit status;
// the test's cleanup kills it if it still runs.
func startChild(t *testing.T, cmd *exec.Cmd, onFailure func()) (wait func(limit time.Duration) error) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			onFailure()
		}
	})
	return func(limit time.Duration) error {
		select {
		case <-done:
			return err
		case <-time.After(limit):
			t.Fatalf("%s did not exit", filepath.Base(cmd.Path))
			return nil
		}
	}
}

// watchLines parses `dledger watch -o json` output: role events, and whether any line said
// events were missed.
func watchLines(t *testing.T, out string) (evs []adminclient.EventJSON, missed []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"missed"`) {
			missed = append(missed, line)
			continue
		}
		var e adminclient.EventJSON
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("watch printed %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs, missed
}

// A `dledger watch` process watches a surviving member through a network that fails while the
// leader is killed and heals after the member saw the failover. It reconnects with the last
// event id and prints every event of the member exactly once: seqs contiguous, none missed.
func TestWatchProcessResumesAcrossAFailover(t *testing.T) {
	// A 3 s detection window: the watched member keeps its leader through a busy machine's stalls.
	g := newProcGroup(t, 3, "--max-heartbeat-leak", "30")
	for i := 0; i < 3; i++ {
		g.start(i)
	}
	const limit = 30 * time.Second // generous: CI is a busy 2-core machine
	old, _ := g.awaitLeader(limit)
	var oldIdx int
	fmt.Sscanf(old, "n%d", &oldIdx)
	wi := (oldIdx + 1) % 3
	dledgertest.Eventually(t, limit, "the watched member to follow the leader", func() bool {
		st, err := g.status(wi)
		return err == nil && st.Role == "FOLLOWER" && st.LeaderID == old
	})

	proxy := newCutProxy(t, g.https[wi])
	var stdout, stderr lockedBuffer
	w := exec.Command(g.bin, "watch", "--http", proxy.addr(), "-o", "json")
	w.Stdout, w.Stderr = &stdout, &stderr
	waitWatch := startChild(t, w, func() {
		t.Logf("watch stdout:\n%s\nwatch stderr:\n%s", stdout.String(), stderr.String())
	})
	dledgertest.Eventually(t, limit, "watch to print the current state", func() bool {
		evs, _ := watchLines(t, stdout.String())
		return len(evs) > 0
	})
	before, _ := watchLines(t, stdout.String())
	if e := before[0]; e.Role != "FOLLOWER" || e.Leader != old {
		t.Fatalf("first line %+v, want the current state: FOLLOWER of %s", e, old)
	}

	proxy.cut() // the client loses its stream and cannot reconnect
	g.kill9(oldIdx)
	dledgertest.Eventually(t, limit, "the watched member to see a new leader", func() bool {
		st, err := g.status(wi)
		return err == nil && st.LeaderID != "" && st.LeaderID != old && (st.Role == "LEADER" || st.Role == "FOLLOWER")
	})
	if evs, _ := watchLines(t, stdout.String()); len(evs) != len(before) {
		t.Fatalf("watch printed events while cut off: %+v", evs)
	}
	proxy.restore()
	var latest adminclient.LeaderWaitJSON
	dledgertest.Eventually(t, limit, "watch to catch up with the member's latest event", func() bool {
		var err error
		if latest, err = adminclient.New(g.https[wi]).WaitLeader(context.Background(), 0, 0); err != nil {
			return false
		}
		evs, _ := watchLines(t, stdout.String())
		return evs[len(evs)-1].Seq == latest.Seq
	})

	w.Process.Signal(syscall.SIGINT)
	if err := waitWatch(limit); err != nil {
		t.Fatalf("watch exited with %v on SIGINT, want 0", err)
	}
	evs, missed := watchLines(t, stdout.String())
	if len(missed) > 0 {
		t.Fatalf("watch said events were missed: %v", missed)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 || evs[i].Instance != evs[0].Instance {
			t.Fatalf("events not contiguous at %d: %+v", i, evs)
		}
	}
	if len(evs) <= len(before) {
		t.Fatalf("no event after the reconnection: %+v", evs)
	}
	if last := evs[len(evs)-1]; last.Leader == old || last.Leader == "" {
		t.Fatalf("last event %+v, want the new leader", last)
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("resuming after seq %d", before[len(before)-1].Seq)) {
		t.Fatalf("stderr does not say where it resumed:\n%s", stderr.String())
	}
	t.Logf("%d events, seqs %d..%d; the stream was cut after seq %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq,
		before[len(before)-1].Seq)
}

// A real member runs --on-role-change with the event in the environment for its election,
// then, when it stops, for the final UNKNOWN event and --on-stop.
func TestServerProcessRunsItsHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	hookDir := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hookDir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := dledgertest.FreePorts(t, 1)[0]
	var out lockedBuffer
	cmd := exec.Command(bin, "server", "--id", "n0", "--peers", fmt.Sprintf("n0-127.0.0.1:%d", port),
		"--data-dir", filepath.Join(dir, "data"), "--insecure-no-peer-auth", "--http", "off",
		"--on-role-change", `env | grep '^DLEDGER_' | sort > "$HOOK_DIR/$DLEDGER_SEQ.env"`,
		"--on-stop", `echo "$DLEDGER_HOOK $DLEDGER_ROLE $DLEDGER_PREVIOUS_ROLE" > "$HOOK_DIR/stopped"`, "--hook-timeout", "5s")
	cmd.Env = append(os.Environ(), "HOOK_DIR="+hookDir)
	cmd.Stdout, cmd.Stderr = &out, &out
	waitServer := startChild(t, cmd, func() { t.Logf("server output:\n%s", out.String()) })
	envOf := func(role string) (string, bool) {
		files, _ := filepath.Glob(filepath.Join(hookDir, "*.env"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), "DLEDGER_ROLE="+role+"\n") {
				return string(b), true
			}
		}
		return "", false
	}
	var env string
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the hook to run for leadership", func() bool {
		var ok bool
		env, ok = envOf("LEADER")
		return ok
	})
	for _, want := range []string{"DLEDGER_GROUP=default\n", "DLEDGER_ID=n0\n", "DLEDGER_LEADER=n0\n",
		"DLEDGER_PREVIOUS_ROLE=", "DLEDGER_HOOK=on_role_change\n", "DLEDGER_TERM=", "DLEDGER_SEQ="} {
		if !strings.Contains(env, want) {
			t.Errorf("the hook's environment lacks %q:\n%s", want, env)
		}
	}
	// CANDIDATE, or UNKNOWN if the leadership came before the hook ran for the candidacy.
	if !strings.Contains(env, "DLEDGER_PREVIOUS_ROLE=CANDIDATE\n") && !strings.Contains(env, "DLEDGER_PREVIOUS_ROLE=UNKNOWN\n") {
		t.Errorf("DLEDGER_PREVIOUS_ROLE in:\n%s", env)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := waitServer(dledgertest.WaitLimit); err != nil {
		t.Fatalf("server exited with %v", err)
	}
	if _, ok := envOf("UNKNOWN"); !ok {
		t.Error("no hook run for the final UNKNOWN event")
	}
	if b, err := os.ReadFile(filepath.Join(hookDir, "stopped")); err != nil || string(b) != "on_stop UNKNOWN LEADER\n" {
		t.Errorf("on-stop wrote %q (%v), want \"on_stop UNKNOWN LEADER\"", b, err)
	}
}

func TestWatchUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"--http", "127.0.0.1:1", "-o", "xml"}, {"--bogus"}, {"--http", "a", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"watch"}, args...), &stdout, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("watch %v: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
}

// The text output: one line per event; a MISSED line when the member says events are gone,
// and also when seqs jump without it saying so.
func TestWatchPrintsMissedEvents(t *testing.T) {
	var stdout, stderr bytes.Buffer
	w := &watchClient{stdout: &stdout, stderr: &stderr}
	feed := func(id, event, data string) {
		ev := adminclient.Event{ID: id, Data: data}
		var err error
		if event == "missed" {
			ev.Missed = &adminclient.MissedJSON{}
			err = json.Unmarshal([]byte(data), ev.Missed)
		} else {
			err = json.Unmarshal([]byte(data), &ev.Role)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.handle(ev)
	}
	e := func(seq uint64, role, leader string) string {
		b, _ := json.Marshal(adminclient.EventJSON{Seq: seq, Term: 2, Role: role, Leader: leader, Time: "T", Member: "n1", Instance: "i"})
		return string(b)
	}
	feed("1@i", "", e(1, "CANDIDATE", ""))
	feed("2@i", "", e(2, "FOLLOWER", "n0"))
	feed("2@i", "", e(2, "FOLLOWER", "n0")) // a repeat is not printed again
	feed("", "missed", `{"missed":true,"since":2,"firstKept":40,"restarted":false,"instance":"i"}`)
	feed("50@i", "", e(50, "LEADER", "n1"))
	feed("52@i", "", e(52, "FOLLOWER", "n2")) // a gap the member did not announce
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []string{
		"T  n1  seq=1  term=2  role=CANDIDATE  leader=-",
		"T  n1  seq=2  term=2  role=FOLLOWER  leader=n0",
		"MISSED events after seq 2: the member keeps only seq 40 on; the current state follows",
		"T  n1  seq=50  term=2  role=LEADER  leader=n1",
		"MISSED events after seq 50: the next event came with seq 52; the current state follows",
		"T  n1  seq=52  term=2  role=FOLLOWER  leader=n2",
	}
	if len(lines) != len(want) {
		t.Fatalf("printed:\n%s", stdout.String())
	}
	for i := range want {
		if !strings.HasSuffix(lines[i], want[i]) {
			t.Errorf("line %d: %q, want ...%q", i, lines[i], want[i])
		}
	}
	if w.lastID != "52@i" {
		t.Errorf("resumes from %q", w.lastID)
	}
}
