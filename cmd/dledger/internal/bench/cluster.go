package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dledger-go/dledger/cmd/dledger/internal/child"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/rpc/secure"
)

// member is one `dledger server` process slot. A slot keeps its id, ports and data dir across
// restarts, like a real member whose machine reboots.
type member struct {
	id         string
	rpcAddr    string
	httpAddr   string
	dataDir    string
	child.Proc // the process, its log (LogPath) and whether its exit was expected
	paused     bool
	ns         string // its network namespace (calm's flap-link), "": the benchmark's own
}

// cluster owns the member processes. Every start goes through it, and shutdown kills them
// all, so nothing outlives the benchmark: the processes also get SIGKILL from the kernel if
// this process dies first (package child), and they run in their own process group so a
// terminal's Ctrl-C reaches only the benchmark, which then cleans up in order.
type cluster struct {
	opts Options
	dir  string

	mu      sync.Mutex
	closed  bool // after shutdown nothing starts again
	peers   string
	keyFile string // the group key of the current layout
	members []*member
}

func newCluster(o Options, dir string) *cluster { return &cluster{opts: o, dir: dir} }

// layout assigns ids, free loopback ports and fresh data dirs under dir/sub for a new group.
// All members must be stopped.
func (c *cluster) layout(sub string) error {
	ports, err := freePorts(2 * c.opts.Members)
	if err != nil {
		return err
	}
	base := filepath.Join(c.dir, sub)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	// Members authenticate each other as in production, so the measured failover includes
	// the handshakes of every reconnection.
	keyFile := filepath.Join(base, "group.key")
	key, err := secure.GenerateKey()
	if err != nil {
		return err
	}
	if err := secure.WriteKeyFile(keyFile, key); err != nil {
		return err
	}
	ms := make([]*member, c.opts.Members)
	var parts []string
	for i := range ms {
		id := fmt.Sprintf("n%d", i)
		ms[i] = &member{id: id,
			rpcAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			httpAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			dataDir:  filepath.Join(base, id),
			Proc:     child.Proc{LogPath: filepath.Join(base, id+".log")},
		}
		parts = append(parts, id+"-"+ms[i].rpcAddr)
		if err := os.MkdirAll(ms[i].dataDir, 0o755); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members, c.peers, c.keyFile = ms, strings.Join(parts, ";"), keyFile
	return nil
}

// freePorts picks n distinct free TCP ports on 127.0.0.1 below the kernel's ephemeral range:
// a port from listen(":0") lies inside that range, and between our check and the member's
// bind an outgoing connection of another member could take it as its source port.
func freePorts(n int) ([]int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 10*n {
		lo, hi = 10000, 20000
	}
	seen := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("cannot find free loopback ports")
		}
		p := lo + rand.IntN(hi-lo)
		if seen[p] || !portFree(p) {
			continue
		}
		seen[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux), or 32768.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 20000 {
				return n
			}
		}
	}
	return 32768
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func (c *cluster) size() int { return len(c.members) }

// index returns the slot of member id, or -1.
func (c *cluster) index(id string) int {
	for i, m := range c.members {
		if m.id == id {
			return i
		}
	}
	return -1
}

// others lists every slot except skip (-1: all).
func (c *cluster) others(skip int) []int {
	var out []int
	for i := range c.members {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// startAll starts every member, back to back, so cold start is as simultaneous as exec allows.
func (c *cluster) startAll() error {
	for i := range c.members {
		if err := c.start(i); err != nil {
			return err
		}
	}
	return nil
}

// start runs member i. Its output is appended to its log file after a marker line, so one
// file tells the story of every incarnation.
func (c *cluster) start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("benchmark is shutting down")
	}
	m := c.members[i]
	argv := []string{c.opts.Binary, "server", "--group", c.opts.Group, "--id", m.id,
		"--peers", c.peers, "--data-dir", m.dataDir, "--http", m.httpAddr, "--key-file", c.keyFile,
		"--profile", c.opts.Profile, "--log-level", c.opts.LogLevel}
	if m.ns != "" {
		argv = inNamespace(m, argv) // see memberNet
	}
	marker := fmt.Sprintf("=== bench: start %s at %s", m.id, time.Now().Format(time.RFC3339Nano))
	if err := m.Start(exec.Command(argv[0], argv[1:]...), marker); err != nil {
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	m.paused = false
	c.note("start %s pid %d", m.id, m.Pid())
	return nil
}

// note appends one event to dir/bench-events.log as a JSON line shaped like the members' zap
// lines (ts in RFC 3339 UTC with microseconds, self, msg), so merging it with their logs by ts
// (a plain sort of the lines' ts strings) gives one timeline of a run: fault, candidates,
// votes, new leader, agreement seen.
func (c *cluster) note(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(c.dir, "bench-events.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return // the timeline is a diagnostic aid; the benchmark goes on without it
	}
	defer f.Close()
	line, _ := json.Marshal(map[string]any{"ts": time.Now().UTC().Format(child.LogTimeLayout), "self": "bench",
		"msg": fmt.Sprintf(format, args...)})
	f.Write(append(line, '\n'))
}

// kill sends SIGKILL to member i (a crash: no hand-over, no clean close) and reaps it.
func (c *cluster) kill(i int) error {
	c.mu.Lock()
	m := c.members[i]
	err := m.Kill()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s: %w", m.id, err)
	}
	c.note("kill -9 %s", m.id)
	<-m.Done
	return nil
}

// pause stops member i with SIGSTOP: a silent failure, its sockets stay open and connected.
func (c *cluster) pause(i int) error { return c.signalPause(i, true) }

// resume continues member i with SIGCONT.
func (c *cluster) resume(i int) error { return c.signalPause(i, false) }

func (c *cluster) signalPause(i int, stop bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if !m.Running() {
		return fmt.Errorf("%s is not running", m.id)
	}
	if err := pauseProcess(m.Cmd.Process, stop); err != nil {
		return fmt.Errorf("%s: %w", m.id, err)
	}
	m.paused = stop
	c.note("%s %s", map[bool]string{true: "SIGSTOP", false: "SIGCONT"}[stop], m.id)
	return nil
}

// isPaused reports whether member i is stopped by us (it cannot answer, so it is not polled).
func (c *cluster) isPaused(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].paused
}

// stopAll kills every running member and waits until each is reaped.
func (c *cluster) stopAll() {
	c.mu.Lock()
	var waits []chan struct{}
	for _, m := range c.members {
		if m.Kill() == nil { // SIGKILL also ends a SIGSTOPped process
			waits = append(waits, m.Done)
		}
	}
	c.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

// shutdown kills every member and refuses later starts. Safe to call repeatedly and from any
// goroutine (the signal watcher calls it while a trial may be running).
func (c *cluster) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stopAll()
}

// unexpectedExit reports a member that ended although nobody killed it: a member crash is a
// finding, and measuring on without it would be wrong.
func (c *cluster) unexpectedExit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for _, m := range c.members {
		if why := m.Unexpected(); why != "" {
			return fmt.Errorf("member %s %s", m.id, why)
		}
	}
	return nil
}
