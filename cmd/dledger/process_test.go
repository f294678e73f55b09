package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server/adminclient"
)

// buildBinary compiles this command into dir.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "dledger")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type procGroup struct {
	t     *testing.T
	bin   string
	peers string
	dirs  []string
	https []string
	procs []*exec.Cmd
	logs  []string
	extra []string // more server flags for every member
	// only holds more server flags for one member, after extra (a flag given again wins).
	only map[int][]string
	// keyFile is the group key every member starts with (--key-file); see writeGroupKey.
	keyFile string
}

// writeGroupKey writes a new group key file into dir, as `dledger keygen` does.
func writeGroupKey(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "group.key")
	key, err := secure.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := secure.WriteKeyFile(path, key); err != nil {
		t.Fatal(err)
	}
	return path
}

func (g *procGroup) start(i int) {
	g.t.Helper()
	logf, err := os.OpenFile(g.logs[i], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		g.t.Fatal(err)
	}
	cmd := exec.Command(g.bin, "server", "--group", "proc", "--id", fmt.Sprintf("n%d", i), "--peers", g.peers,
		"--data-dir", g.dirs[i], "--http", g.https[i], "--heartbeat-interval", "100ms",
		"--min-vote-interval", "50", "--max-vote-interval", "150", "--vote-round-base", "200ms", "--log-level", "info")
	if g.keyFile != "" { // "": member keys, from only (member_keys_test.go)
		cmd.Args = append(cmd.Args, "--key-file", g.keyFile)
	}
	cmd.Args = append(cmd.Args, g.extra...)
	cmd.Args = append(cmd.Args, g.only[i]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	logf.Close()
	g.procs[i] = cmd
}

func (g *procGroup) kill9(i int) {
	g.procs[i].Process.Kill() // SIGKILL: no hand-over, no clean close
	g.procs[i].Wait()
	g.procs[i] = nil
}

func (g *procGroup) status(i int) (adminclient.StatusJSON, error) {
	return fetchStatus(&http.Client{Timeout: 500 * time.Millisecond}, g.https[i])
}

// awaitLeader polls every live member until exactly one leads and a quorum of the group
// follows it at its term (dledgertest.StableLeader).
func (g *procGroup) awaitLeader(limit time.Duration) (string, int64) {
	g.t.Helper()
	return dledgertest.AwaitLeader(g.t, limit, len(g.procs), func() []dledgertest.Member {
		var v []dledgertest.Member
		for i, p := range g.procs {
			if p == nil {
				continue
			}
			if st, err := g.status(i); err == nil {
				v = append(v, dledgertest.Member{ID: st.SelfID, Up: true, Leading: st.Role == "LEADER",
					LeaderID: st.LeaderID, Term: st.Term})
			}
		}
		return v
	})
}

// keepLogsOnFailure prints the tail of every member's log if the test fails: the logs live in
// a TempDir, which is gone once the test ends. Register it after that TempDir, so it runs first.
func (g *procGroup) keepLogsOnFailure() {
	g.t.Cleanup(func() {
		if !g.t.Failed() {
			return
		}
		for _, path := range g.logs {
			b, err := os.ReadFile(path)
			if err != nil {
				g.t.Logf("%s: %v", path, err)
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			g.t.Logf("last %d lines of %s:\n%s", len(lines), filepath.Base(path), strings.Join(lines, "\n"))
		}
	})
}

// startedLine is the restarted member's "member started" log line: the term and vote it
// loaded, taken before its first StateMaintainer pass could change them.
type startedLine struct {
	Msg     string `json:"msg"`
	Term    int64  `json:"term"`
	VoteFor string `json:"voteFor"`
}

func lastStartedLine(t *testing.T, path string) (startedLine, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last startedLine
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		var l startedLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "member started" {
			last, found = l, true
		}
	}
	return last, found
}

func TestRealProcessesElectCrashRestartRejoin(t *testing.T) {
	g := newProcGroup(t, 3)
	for i := 0; i < 3; i++ {
		g.start(i)
	}
	const limit = 30 * time.Second // generous: CI is a busy 2-core machine
	old, term := g.awaitLeader(limit)
	var oldIdx int
	fmt.Sscanf(old, "n%d", &oldIdx)

	g.kill9(oldIdx)
	// What the dead leader persisted: the term it led and its own vote in it.
	fs, err := memberstate.OpenFileStoreReadOnly(g.dirs[oldIdx])
	if err != nil {
		t.Fatal(err)
	}
	d, err := fs.Load()
	if err != nil || d.Term != term || d.VoteFor != old {
		t.Fatalf("persisted state of the killed leader: %+v %v, want term %d vote %s", d, err, term, old)
	}
	id, term2 := g.awaitLeader(limit)
	if id == old || term2 <= term {
		t.Fatalf("after kill -9 of %s@%d the leader is %s@%d", old, term, id, term2)
	}

	g.start(oldIdx)
	// The restarted member must come back with what it persisted, not at term 0 with no vote
	// (which could let it vote twice in a term, S2/S3). Its first /v1/status answers come before
	// it can hear of the new term (a follower of nobody adopts a term only on its next pass), so
	// poll fast; later answers must never be lower either.
	deadline := time.Now().Add(limit)
	answers := 0
	for answers < 5 {
		st, err := g.status(oldIdx)
		if err == nil {
			answers++
			if st.Term < d.Term || (st.Term == d.Term && st.VoteFor != d.VoteFor) {
				t.Fatalf("restarted %s reports term %d vote %q; it persisted term %d vote %q", old, st.Term, st.VoteFor, d.Term, d.VoteFor)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("restarted %s never answered /v1/status: %v", old, err)
		}
		time.Sleep(2 * time.Millisecond) // polling interval
	}
	if l, ok := lastStartedLine(t, g.logs[oldIdx]); !ok || l.Term != d.Term || l.VoteFor != d.VoteFor {
		t.Fatalf("restarted %s started with term %d vote %q (logged: %v); it persisted term %d vote %q",
			old, l.Term, l.VoteFor, ok, d.Term, d.VoteFor)
	}
	for {
		st, err := g.status(oldIdx)
		if err == nil && st.Role == "FOLLOWER" && st.LeaderID == id {
			if st.Term != term2 {
				t.Fatalf("restarted member at term %d, want %d", st.Term, term2)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted %s did not rejoin as follower of %s: %+v %v", old, id, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stable: no leader change for several detection windows after the rejoin.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for i := range g.procs {
			if st, err := g.status(i); err == nil && (st.LeaderID != id || st.Term != term2) {
				t.Fatalf("leader changed after the rejoin: n%d sees %s@%d", i, st.LeaderID, st.Term)
			}
		}
	}
}

// A member runs on one Go processor unless GOMAXPROCS says otherwise (useOneProcessor: an idle
// member costs a third of the CPU). Read back from the Go collector's gauge on /metrics.
func TestRealProcessOneProcessorUnlessGOMAXPROCS(t *testing.T) {
	g := newProcGroup(t, 3)
	for i, env := range []string{"", "2"} {
		t.Setenv("GOMAXPROCS", env) // the child inherits it; "" counts as unset
		g.start(i)
		want := map[string]string{"": "1", "2": "2"}[env]
		var got string
		deadline := time.Now().Add(30 * time.Second)
		for got != want && time.Now().Before(deadline) {
			got = gauge(g.https[i], "go_sched_gomaxprocs_threads")
			time.Sleep(20 * time.Millisecond) // polling interval
		}
		if got != want {
			t.Fatalf("GOMAXPROCS=%q: the member runs on %q processors, want %s", env, got, want)
		}
	}
}

// gauge reads an unlabelled series of a member's /metrics ("" if unreachable or absent).
func gauge(addr, name string) string {
	v, _ := metricValue(addr, name)
	return v
}
