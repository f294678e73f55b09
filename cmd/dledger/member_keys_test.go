package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/secure"
)

// memberKeyFiles writes n members' key files (n<i>.key) and their trust file into dir, as
// `dledger keygen --member` and an operator would, and returns the trust file's path and each
// member's trust line.
func memberKeyFiles(t *testing.T, dir string, n int) (trust string, lines []string) {
	t.Helper()
	for i := range n {
		var stdout, stderr bytes.Buffer
		id := fmt.Sprintf("n%d", i)
		if code := run([]string{"keygen", "--member", "--id", id, filepath.Join(dir, id+".key")}, &stdout, &stderr); code != 0 {
			t.Fatalf("keygen --member: exit %d, %s", code, stderr.String())
		}
		lines = append(lines, stdout.String())
	}
	trust = filepath.Join(dir, "trust")
	if err := os.WriteFile(trust, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return trust, lines
}

// TestKeygenMember: keygen --member writes a private key a member can load (mode 600, never
// overwritten) and prints exactly the trust file line of its public key.
func TestKeygenMember(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "n1.key")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keygen", "--member", "--id", "n1", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, %s", code, stderr.String())
	}
	key, err := secure.LoadStaticKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "n1 "+key.Public().String()+"\n"; got != want {
		t.Fatalf("stdout %q, want the trust line %q", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o", fi.Mode().Perm())
	}
	if code := run([]string{"keygen", "--member", path}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "exists") {
		t.Fatalf("second keygen on the same file: exit %d, %q", code, stderr.String())
	}
	if code := run([]string{"keygen", "--member", "--rotate", path + "2"}, &stdout, &stderr); code != 2 {
		t.Fatalf("--member --rotate: exit %d", code)
	}
}

// Bad member key input is refused at start, exit 2, one line saying why, nothing created.
func TestServerRefusesBadMemberKeys(t *testing.T) {
	dir := t.TempDir()
	trust, lines := memberKeyFiles(t, dir, 3)
	free := dledgertest.FreePorts(t, 3)
	peers := fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:%d;n2-127.0.0.1:%d", free[0], free[1], free[2])
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dupTrust := write("dup", lines[0]+lines[1]+lines[2]+lines[1], 0o644)
	badKeyTrust := write("badkey", lines[0]+lines[1]+"n2 AAAA\n", 0o644)
	noSelf := write("noself", lines[1]+lines[2], 0o644)
	noPeer := write("nopeer", lines[0]+lines[1], 0o644)
	loose := filepath.Join(dir, "loose.key")
	data, _ := os.ReadFile(filepath.Join(dir, "n0.key"))
	write("loose.key", string(data), 0o644)
	own := filepath.Join(dir, "n0.key")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"duplicate id", []string{"--member-key-file", own, "--trust-file", dupTrust}, "lines 2 and 4: id \"n1\" is listed twice"},
		{"malformed key", []string{"--member-key-file", own, "--trust-file", badKeyTrust}, "line 3, key 1 of \"n2\": not a base64"},
		{"key file readable by others", []string{"--member-key-file", loose, "--trust-file", trust}, "chmod 600 " + loose},
		{"own key not in the trust list", []string{"--member-key-file", filepath.Join(dir, "n1.key"), "--trust-file", trust}, "is not the trust list's key for \"n0\""},
		{"self not listed", []string{"--member-key-file", own, "--trust-file", noSelf}, "\"n0\", this member, is not in the trust list"},
		{"peer not listed", []string{"--member-key-file", own, "--trust-file", noPeer}, "member \"n2\" is not in the trust list"},
		{"key without trust", []string{"--member-key-file", own}, "go together"},
		{"with a group key", []string{"--member-key-file", own, "--trust-file", trust, "--key-file", writeGroupKey(t, t.TempDir())}, "exclude"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"server", "--id", "n0", "--peers", peers, "--data-dir", data}, c.args...), &stdout, &stderr)
			line := stderr.String()
			if code != 2 || strings.Count(line, "\n") != 1 || !strings.Contains(line, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line saying %q", code, line, c.want)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a refused start created the data dir")
			}
		})
	}
}

// TestRealProcessMemberKeysRotateOnSIGHUP: three member processes with member keys replace a
// follower's key without a restart (new key added to its trust line, SIGHUP all; its key file
// replaced, SIGHUP it; old key dropped, SIGHUP all): the others close its connections made
// with the old key (revoked in their logs), and the leader and term never change. A SIGHUP
// with a broken trust file is refused with the reason and changes nothing.
func TestRealProcessMemberKeysRotateOnSIGHUP(t *testing.T) {
	g := newProcGroup(t, 3)
	dir := t.TempDir()
	trust, lines := memberKeyFiles(t, dir, 3)
	g.keyFile = ""
	g.only = map[int][]string{}
	for i := range 3 {
		g.only[i] = []string{"--member-key-file", filepath.Join(dir, fmt.Sprintf("n%d.key", i)), "--trust-file", trust,
			"--max-heartbeat-leak", "10", // a 1 s window: a loaded machine's stall is no failover
			"--log-level", "debug"} // "rpc: connected", awaited below
		g.start(i)
	}
	leader, term := g.awaitLeader(30 * time.Second)
	// Every member's links to its peers are up before the keys change: step 3 checks that each
	// member closes the connections x authenticated with its old key, and a link whose first
	// dial was refused (its peer not yet listening) and that came up after step 2 would hold
	// none (a CI run under -race load: n2's link to x came up late, and n2 had nothing to close).
	addrs := map[int]string{}
	for _, item := range strings.Split(g.peers, ";") {
		id, addr, _ := strings.Cut(item, "-")
		var k int
		if _, err := fmt.Sscanf(id, "n%d", &k); err == nil {
			addrs[k] = addr
		}
	}
	for i := range 3 {
		for j, addr := range addrs {
			if j == i {
				continue
			}
			dledgertest.Eventually(t, 30*time.Second, fmt.Sprintf("n%d's link to n%d up", i, j), func() bool {
				for _, l := range strings.Split(g.log(i), "\n") {
					if strings.Contains(l, `"msg":"rpc: connected"`) && strings.Contains(l, `"addr":"`+addr+`"`) {
						return true
					}
				}
				return false
			})
		}
	}
	dledgertest.Eventually(t, 30*time.Second, "every member following", func() bool {
		for i := range 3 {
			if st, err := g.status(i); err != nil || st.LeaderID != leader || st.Term != term {
				return false
			}
		}
		return true
	})
	x := (g.indexOf(leader) + 1) % 3 // a follower
	xid := fmt.Sprintf("n%d", x)
	unchanged := func(when string) {
		t.Helper()
		for i := range 3 {
			st, err := g.status(i)
			if err != nil || st.LeaderID != leader || st.Term != term {
				t.Fatalf("%s: n%d follows %q at %d (%v); want %s at %d", when, i, st.LeaderID, st.Term, err, leader, term)
			}
		}
	}
	hup := func(when string, members ...int) {
		t.Helper()
		for _, i := range members {
			before := strings.Count(g.log(i), `"msg":"reload`)
			if err := g.procs[i].Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			dledgertest.Eventually(t, 30*time.Second, when+": n"+fmt.Sprint(i)+" reloads", func() bool {
				return strings.Count(g.log(i), `"msg":"reload`) > before
			})
		}
	}
	newKey := filepath.Join(dir, "x.new")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keygen", "--member", "--id", xid, newKey}, &stdout, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	newPub := strings.Fields(stdout.String())[1]
	setTrust := func(xLine string) {
		t.Helper()
		var b strings.Builder
		for i, l := range lines {
			if i == x {
				l = xLine + "\n"
			}
			b.WriteString(l)
		}
		if err := os.WriteFile(trust, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setTrust(strings.TrimSpace(lines[x]) + " " + newPub) // step 1
	hup("step 1", 0, 1, 2)
	unchanged("step 1")
	if err := os.Rename(newKey, filepath.Join(dir, xid+".key")); err != nil { // step 2
		t.Fatal(err)
	}
	hup("step 2", x)
	unchanged("step 2")
	setTrust(xid + " " + newPub) // step 3
	hup("step 3", 0, 1, 2)
	step3 := time.Now()
	for i := range 3 {
		if i != x && !strings.Contains(g.log(i), `"reason":"revoked"`) {
			t.Fatalf("n%d did not close %s's connections on the old key", i, xid)
		}
	}
	g.awaitHeartbeatSince(x, step3) // x talks with its new key
	unchanged("step 3")
	// A broken trust file: refused with the reason, the running keys kept.
	if err := os.WriteFile(trust, []byte(lines[0]+lines[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	hup("broken trust file", 0)
	if !strings.Contains(g.log(0), "reload failed") || !strings.Contains(g.log(0), "listed twice") {
		t.Fatal("n0 did not log the refused reload and its reason")
	}
	unchanged("a refused reload")
	if strings.Contains(g.log(0), `"reason":"unknown_key"`) || strings.Contains(g.log(0), `"reason":"wrong_id"`) {
		t.Fatal("a key was refused that the rotation kept trusted")
	}
}

// log is member i's log so far.
func (g *procGroup) log(i int) string {
	b, err := os.ReadFile(g.logs[i])
	if err != nil {
		g.t.Fatal(err)
	}
	return string(b)
}

func (g *procGroup) indexOf(id string) int {
	var i int
	fmt.Sscanf(id, "n%d", &i)
	return i
}

// awaitHeartbeatSince waits until member i has a heartbeat from its leader newer than since:
// its connection with the leader works (after a reload closed the one it had).
func (g *procGroup) awaitHeartbeatSince(i int, since time.Time) {
	g.t.Helper()
	dledgertest.Eventually(g.t, 30*time.Second, fmt.Sprintf("n%d hearing its leader", i), func() bool {
		st, err := g.status(i)
		return err == nil && st.LastHeartBeatMsAgo >= 0 && time.Since(since) > time.Duration(st.LastHeartBeatMsAgo)*time.Millisecond
	})
}

// TestRealProcessAddWithPublicKey: issue 32's "membership changes carry keys" with real
// processes and the CLI. Three processes authenticate with member keys from a trust file that
// does not name n3; n3 starts with --join and its own key; `dledger members add --public-key`
// carries n3's key, so every member trusts n3 with the change: n3 is promoted and votes, no
// trust file edited, no SIGHUP. A malformed key is a usage error (exit 2) and a key that is
// another member's is refused (exit 1), the group untouched.
func TestRealProcessAddWithPublicKey(t *testing.T) {
	g := newProcGroup(t, 3)
	dir := t.TempDir()
	trust, lines := memberKeyFiles(t, dir, 3)
	g.keyFile = ""
	g.only = map[int][]string{}
	for i := range 3 {
		g.only[i] = []string{"--member-key-file", filepath.Join(dir, fmt.Sprintf("n%d.key", i)), "--trust-file", trust,
			"--max-heartbeat-leak", "30"}
		g.start(i)
	}
	const limit = 30 * time.Second
	leaderID, term := g.awaitLeader(limit)
	leader := g.indexOf(leaderID)
	j, jAddr := g.addJoiner([]int{0, 1, 2})
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keygen", "--member", "--id", "n3", filepath.Join(dir, "n3.key")}, &stdout, &stderr); code != 0 {
		t.Fatalf("keygen: %s", stderr.String())
	}
	n3line := stdout.String()
	n3trust := filepath.Join(dir, "trust3")
	if err := os.WriteFile(n3trust, []byte(strings.Join(lines, "")+n3line), 0o644); err != nil {
		t.Fatal(err)
	}
	g.only[j] = append(g.only[j], "--member-key-file", filepath.Join(dir, "n3.key"), "--trust-file", n3trust)
	g.start(j)
	key := strings.Fields(n3line)[1]
	if code, _, errb := members("add", "--http", g.https[leader], "--id", "n3", "--addr", jAddr, "--public-key", "AAAA"); code != 2 ||
		!strings.Contains(errb, "--public-key") {
		t.Fatalf("a malformed key: exit %d: %s", code, errb)
	}
	other := strings.Fields(lines[(leader+1)%3])[1]
	if code, _, errb := members("add", "--http", g.https[leader], "--id", "n3", "--addr", jAddr, "--public-key", other); code != 1 ||
		!strings.Contains(errb, "already") {
		t.Fatalf("another member's key: exit %d: %s", code, errb)
	}
	if code, out, errb := members("add", "--http", g.https[leader], "--id", "n3", "--addr", jAddr, "--public-key", key); code != 0 {
		t.Fatalf("members add --public-key: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	if code, out, errb := members("promote", "--http", g.https[leader], "--id", "n3", "--wait", "25s"); code != 0 {
		t.Fatalf("members promote: exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	dledgertest.Eventually(t, limit, "n3 a voter following the leader", func() bool {
		st, err := g.status(j)
		return err == nil && st.LeaderID == leaderID && st.Term == term && strings.Contains(kinds(g.membership(j)), "n3:voter")
	})
}
