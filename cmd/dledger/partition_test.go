//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

// The partition test runs real members in network namespaces and cuts them off with silent
// packet drops (issue 18): a follower cut off for 3, 14 and 30 s must rejoin soon after the
// heal without a leader change or a new term, and a cut-off leader must be replaced and
// rejoin as a follower without deposing its successor.
//
// Network: one namespace per member, each with a veth into a bridge in the test's own
// namespace. A cut is made with policy routing, which needs nothing beyond iproute2 (this
// kernel has no netem, and neither nft nor the tc drop action is available by default): in
// each namespace the rule that looks up local addresses is moved from priority 0 to 100,
// and a cut between members a and b adds "from <b's address> blackhole" at priority 10 in
// a's namespace, and the reverse in b's. Every packet between them is then discarded on
// arrival, silently (no ICMP reaches the sender: each side drops the other's), exactly as a
// dead switch port would. The members' admin APIs listen on each namespace's loopback and
// are read through sockets the test opens inside that namespace, so a cut never hides a
// member from the test.
//
// Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and the ip command; it skips with the
// reason otherwise. DLEDGER_PARTITION_BIN runs a prebuilt binary instead of building this
// package (to measure an older version).

// Timing bounds, generous on purpose (a busy 2-core machine), explained:
const (
	// rejoinBound: after the heal, the cut-off member must follow the leader again within
	// this. The rpc client drops a connection that went silent and redials; a dial whose SYN
	// was lost just before the heal gives up after DialTimeout (500 ms) and the next one
	// follows within ReconnectMin (50 ms), then the leader's next heartbeat (200 ms interval)
	// makes the member a follower: about 0.8 s at worst, five times that here. Without that
	// rule the member waited for TCP's next retransmission, 5-25 s after a 14-30 s partition.
	rejoinBound = 4 * time.Second
	// electBound: a group with a quorum elects a leader within this (default timings:
	// a follower campaigns after 600 ms, a vote round takes under a second).
	electBound = 15 * time.Second
	// settle: how long the group is watched after a heal for a leader change it might cause.
	settle = 3 * time.Second
	// measureLimit: how long a rejoin is waited for before it is called failed. Far above
	// rejoinBound, so that a slow rejoin is measured and reported, not only refused.
	measureLimit = 30 * time.Second
	// pollEvery is the status polling interval.
	pollEvery = 25 * time.Millisecond
)

func TestPartitionRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes in network namespaces for about a minute")
	}
	net5 := newNamespaceNet(t, 5)
	bin := os.Getenv("DLEDGER_PARTITION_BIN")
	dir := t.TempDir()
	if bin == "" {
		bin = buildBinary(t, dir)
	}
	g := net5.startGroup(t, bin, dir)

	leader, term := g.awaitLeader(electBound, nil)
	t.Logf("leader %s at term %d", g.ids[leader], term)
	var followers []int
	for i := range g.ids {
		if i != leader {
			followers = append(followers, i)
		}
	}

	// Followers: the 30 s and 14 s partitions run at once (two of five cut off: a quorum of
	// three remains), and the 3 s one once the 14 s one has rejoined (so that a slow rejoin
	// can not take the quorum away), so the whole phase takes about 30 s. Throughout, no
	// member may see another leader or a higher term.
	watch := g.watchStable(leader, term)
	a, b, c := followers[0], followers[1], followers[2]
	measure := func(i int, cutAt time.Time) {
		healAt := time.Now()
		took, err := g.awaitFollowing(i, leader, term, healAt.Add(measureLimit))
		cut := healAt.Sub(cutAt).Round(time.Second)
		if err != nil {
			t.Errorf("follower %s cut off for %v: %v", g.ids[i], cut, err)
			return
		}
		t.Logf("follower %s cut off for %v rejoined %v after the heal", g.ids[i], cut, took.Round(time.Millisecond))
		if took > rejoinBound {
			t.Errorf("follower %s cut off for %v rejoined %v after the heal, bound %v", g.ids[i], cut,
				took.Round(time.Millisecond), rejoinBound)
		}
	}
	start := time.Now()
	net5.isolate(a)
	net5.isolate(b)
	healedA := make(chan struct{})
	go func() { // the 30 s partition, in the background
		defer close(healedA)
		sleepUntil(start.Add(30 * time.Second))
		net5.heal(a)
		measure(a, start)
	}()
	sleepUntil(start.Add(14 * time.Second))
	net5.heal(b)
	measure(b, start)
	sleepUntil(start.Add(16 * time.Second))
	cutC := time.Now()
	net5.isolate(c)
	sleepUntil(cutC.Add(3 * time.Second))
	net5.heal(c)
	measure(c, cutC)
	<-healedA
	time.Sleep(settle)
	if err := watch.stop(); err != nil {
		t.Errorf("while followers were cut off and rejoined: %v", err)
	}
	if t.Failed() {
		return
	}

	// The leader cut off: the others elect a successor, and the old leader, healed, follows
	// it without deposing it.
	cutL := time.Now()
	net5.isolate(leader)
	isOld := func(i int) bool { return i == leader }
	newLeader, newTerm := g.awaitLeader(electBound, isOld)
	if newTerm <= term {
		t.Fatalf("successor %s at term %d, not above the old term %d", g.ids[newLeader], newTerm, term)
	}
	t.Logf("successor %s at term %d, %v after the leader was cut off", g.ids[newLeader], newTerm,
		time.Since(cutL).Round(time.Millisecond))
	sleepUntil(cutL.Add(5 * time.Second))
	watch = g.watchStable(newLeader, newTerm)
	net5.heal(leader)
	took, err := g.awaitFollowing(leader, newLeader, newTerm, time.Now().Add(measureLimit))
	if err != nil {
		t.Fatalf("old leader %s: %v", g.ids[leader], err)
	}
	t.Logf("old leader %s, cut off for %v, follows %s %v after the heal", g.ids[leader],
		time.Since(cutL).Round(time.Second), g.ids[newLeader], took.Round(time.Millisecond))
	if took > rejoinBound {
		t.Errorf("old leader rejoined %v after the heal, bound %v", took, rejoinBound)
	}
	time.Sleep(settle)
	if err := watch.stop(); err != nil {
		t.Errorf("after the old leader rejoined: %v", err)
	}
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// namespaceNet is a bridge in the test's namespace and one namespace per member, each with
// a veth into the bridge.
type namespaceNet struct {
	t      *testing.T
	prefix string
	ns     []string // namespace names
	ips    []string // member addresses
	mu     sync.Mutex
	cuts   map[[2]int]int // directed drop rules (in ns a, from b) and how many cuts need them
}

// run runs a command, failing the test with its output if it fails.
func (n *namespaceNet) run(args ...string) {
	n.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		n.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNamespaceNet builds the network, or skips the test with the reason it can not.
// netRuns counts the namespace networks this test process made (see newNamespaceNet).
var netRuns int

func newNamespaceNet(t *testing.T, members int) *namespaceNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("partition test: needs root to create network namespaces (ip netns, veth, bridge)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partition test: needs the ip command (iproute2)")
	}
	if sysSetns == 0 {
		t.Skipf("partition test: setns system call number unknown on %s", runtime.GOARCH)
	}
	// Names unique per process and per run: a namespace's deletion removes its veth pair
	// asynchronously, so a second run (-count=3) reusing the names found them still there.
	netRuns++
	id := os.Getpid() % 200
	n := &namespaceNet{t: t, prefix: fmt.Sprintf("dlp%d%c", id, 'a'+rune(netRuns%26)), cuts: map[[2]int]int{}}
	bridge := n.prefix + "br"
	subnet := fmt.Sprintf("10.213.%d", id)
	if out, err := exec.Command("ip", "link", "add", bridge, "type", "bridge").CombinedOutput(); err != nil {
		t.Skipf("partition test: can not create a bridge (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	n.run("ip", "link", "set", bridge, "up")
	for i := 0; i < members; i++ {
		ns := fmt.Sprintf("%sn%d", n.prefix, i)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("partition test: can not create a network namespace (%v: %s)", err, strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		host, inner := fmt.Sprintf("%sh%d", n.prefix, i), fmt.Sprintf("%si%d", n.prefix, i)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		n.run("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() }) // takes its peer along
		n.run("ip", "link", "set", inner, "netns", ns)
		n.run("ip", "link", "set", host, "master", bridge, "up")
		n.run("ip", "-n", ns, "addr", "add", ip+"/24", "dev", inner)
		n.run("ip", "-n", ns, "link", "set", inner, "up")
		n.run("ip", "-n", ns, "link", "set", "lo", "up")
		// Local addresses are looked up after the drop rules (see the file comment).
		n.run("ip", "-n", ns, "rule", "add", "pref", "100", "lookup", "local")
		n.run("ip", "-n", ns, "rule", "del", "pref", "0")
		n.ns, n.ips = append(n.ns, ns), append(n.ips, ip)
	}
	// Prove the drop works here before relying on it.
	n.block(0, 1)
	if out, err := exec.Command("ip", "-n", n.ns[0], "rule", "show", "pref", "10").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "blackhole") {
		t.Skipf("partition test: policy routing blackhole rules do not work here (%v: %s)", err, out)
	}
	n.unblock(0, 1)
	return n
}

// block cuts a and b off from each other; unblock undoes one block.
func (n *namespaceNet) block(a, b int)   { n.drop(a, b, +1); n.drop(b, a, +1) }
func (n *namespaceNet) unblock(a, b int) { n.drop(a, b, -1); n.drop(b, a, -1) }

// drop adds (delta +1) or removes (-1) one reason to discard, in a's namespace, packets
// from b; the rule exists while there is any.
func (n *namespaceNet) drop(a, b, delta int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]int{a, b}
	before := n.cuts[k]
	n.cuts[k] = before + delta
	op := ""
	switch {
	case before == 0 && delta > 0:
		op = "add"
	case before == 1 && delta < 0:
		op = "del"
	default:
		return
	}
	// Errorf, not Fatalf: this may run on a goroutine other than the test's.
	args := []string{"-n", n.ns[a], "rule", op, "pref", "10", "from", n.ips[b], "blackhole"}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Errorf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// isolate cuts member i off from every other member; heal undoes it.
func (n *namespaceNet) isolate(i int) {
	for j := range n.ns {
		if j != i {
			n.block(i, j)
		}
	}
}

func (n *namespaceNet) heal(i int) {
	for j := range n.ns {
		if j != i {
			n.unblock(i, j)
		}
	}
}

// sysSetns is the setns system call's number, which package syscall does not name; 0 where
// this test does not know it (it then skips).
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268, "riscv64": 268, "loong64": 268}[runtime.GOARCH]

// nsDial returns a DialContext that opens its sockets inside the namespace: a socket stays in
// the namespace it was created in, so only the creating thread has to enter it. That thread
// is locked and never unlocked, so the runtime ends it with the goroutine.
func nsDial(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			f, err := os.Open(filepath.Join("/var/run/netns", ns))
			if err != nil {
				ch <- result{err: err}
				return
			}
			defer f.Close()
			if _, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
				ch <- result{err: fmt.Errorf("setns %s: %v", ns, e)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// nsGroup is a group of members, one per namespace.
type nsGroup struct {
	t       *testing.T
	ids     []string
	procs   []*exec.Cmd
	https   []string
	clients []*http.Client
}

func (n *namespaceNet) startGroup(t *testing.T, bin, dir string) *nsGroup {
	t.Helper()
	g := &nsGroup{t: t}
	pg := &procGroup{t: t} // for its log tails on failure
	var peers []string
	for i := range n.ns {
		g.ids = append(g.ids, fmt.Sprintf("n%d", i))
		peers = append(peers, fmt.Sprintf("n%d-%s:20911", i, n.ips[i]))
		pg.logs = append(pg.logs, filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
	}
	pg.keepLogsOnFailure()
	t.Cleanup(func() {
		for _, p := range g.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	keyFile := writeGroupKey(t, dir)
	for i := range n.ns {
		logf, err := os.Create(pg.logs[i])
		if err != nil {
			t.Fatal(err)
		}
		// The default (lan) timings: heartbeat every 200 ms, a follower campaigns after 600 ms.
		cmd := exec.Command("ip", "netns", "exec", n.ns[i], bin, "server", "--group", "part",
			"--id", g.ids[i], "--peers", strings.Join(peers, ";"),
			"--data-dir", filepath.Join(dir, g.ids[i]), "--http", "127.0.0.1:21911", "--log-level", "info",
			"--key-file", keyFile)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		g.procs = append(g.procs, cmd)
		g.https = append(g.https, "127.0.0.1:21911")
		g.clients = append(g.clients, &http.Client{Timeout: time.Second,
			Transport: &http.Transport{DialContext: nsDial(n.ns[i])}})
	}
	return g
}

func (g *nsGroup) status(i int) (adminclient.StatusJSON, error) {
	return fetchStatus(g.clients[i], g.https[i])
}

// awaitLeader waits until one member that is not excluded leads and every member not
// excluded follows it at its term, and returns the leader and term.
func (g *nsGroup) awaitLeader(limit time.Duration, exclude func(int) bool) (int, int64) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		leader, term, agreed := -1, int64(0), true
		for i := range g.ids {
			if exclude != nil && exclude(i) {
				continue
			}
			st, err := g.status(i)
			if err != nil || st.LeaderID == "" || (leader >= 0 && (g.ids[leader] != st.LeaderID || st.Term != term)) {
				agreed = false
				break
			}
			if leader < 0 {
				leader, term = indexOf(g.ids, st.LeaderID), st.Term
			}
		}
		if agreed && leader >= 0 && (exclude == nil || !exclude(leader)) {
			if st, err := g.status(leader); err == nil && st.Role == "LEADER" && st.Term == term {
				return leader, term
			}
		}
		time.Sleep(pollEvery)
	}
	g.t.Fatalf("no leader agreed on by every member within %v", limit)
	return -1, 0
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// awaitFollowing waits until member i is a follower of leader at term and returns how long
// that took, or an error at the deadline with what i reported last.
func (g *nsGroup) awaitFollowing(i, leader int, term int64, deadline time.Time) (time.Duration, error) {
	start := time.Now()
	var last adminclient.StatusJSON
	var lastErr error
	for time.Now().Before(deadline) {
		st, err := g.status(i)
		if err == nil && st.Role == "FOLLOWER" && st.LeaderID == g.ids[leader] && st.Term == term {
			return time.Since(start), nil
		}
		last, lastErr = st, err
		time.Sleep(pollEvery)
	}
	return 0, fmt.Errorf("not following %s at term %d %v after the heal: last status role %s term %d leader %q (%v)",
		g.ids[leader], term, time.Since(start).Round(time.Millisecond), last.Role, last.Term, last.LeaderID, lastErr)
}

// stableWatch polls every member until stopped and records any sign that the leader was
// deposed: the leader not leading at its term, any member at a higher term (a cut-off
// member that inflated its term would depose the leader on its return), or another leader
// at that term. A cut-off member that reports no leader, or an old term (the old leader
// before it rejoins), is not counted against it.
type stableWatch struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	bad   []string
}

func (g *nsGroup) watchStable(leader int, term int64) *stableWatch {
	w := &stableWatch{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stopc:
				return
			case <-time.After(pollEvery):
			}
			for i := range g.ids {
				st, err := g.status(i)
				if err != nil {
					continue
				}
				bad := st.Term > term || (st.Term == term && st.LeaderID != "" && st.LeaderID != g.ids[leader]) ||
					(i == leader && (st.Role != "LEADER" || st.Term != term))
				if bad {
					w.mu.Lock()
					w.bad = append(w.bad, fmt.Sprintf("%s: %s term %d leader %q", g.ids[i], st.Role, st.Term, st.LeaderID))
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

func (w *stableWatch) stop() error {
	close(w.stopc)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var uniq []string
	for _, b := range w.bad {
		if !seen[b] {
			seen[b] = true
			uniq = append(uniq, b)
		}
	}
	sort.Strings(uniq)
	if len(uniq) > 10 {
		uniq = uniq[:10]
	}
	return fmt.Errorf("leader or term changed (%d reports): %s", len(w.bad), strings.Join(uniq, "; "))
}
