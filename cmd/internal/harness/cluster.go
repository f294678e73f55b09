package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dledger-go/dledger/cmd/internal/child"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/rpc/secure"
)

// member is one `dledger server` process slot. A slot keeps its id, ports and data dir across
// restarts, like a real member whose machine reboots.
type Member struct {
	ID         string
	RPCAddr    string
	HTTPAddr   string
	DataDir    string
	child.Proc // the process, its log (LogPath) and whether its exit was expected
	paused     bool
	NS         string // its network namespace (calm's flap-link), "": the benchmark's own
}

// cluster owns the member processes. Every start goes through it, and shutdown kills them
// all, so nothing outlives the benchmark: the processes also get SIGKILL from the kernel if
// this process dies first (package child), and they run in their own process group so a
// terminal's Ctrl-C reaches only the benchmark, which then cleans up in order.
type Cluster struct {
	opts Options
	dir  string

	mu      sync.Mutex
	closed  bool // after shutdown nothing starts again
	peers   string
	keyFile string // the group key of the current layout
	Members []*Member
	delay   *DelayNet // nil: members reach each other directly (UseDelayNet)
}

// UseDelayNet starts the members from then on behind d: each with a peers string of its own,
// which names d's proxies for the other members (DelayNet).
func (c *Cluster) UseDelayNet(d *DelayNet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delay = d
}

func NewCluster(o Options, dir string) *Cluster { return &Cluster{opts: o, dir: dir} }

// layout assigns ids, free loopback ports and fresh data dirs under dir/sub for a new group.
// All members must be stopped.
func (c *Cluster) Layout(sub string) error {
	ports, err := FreePorts(2 * c.opts.Members)
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
	ms := make([]*Member, c.opts.Members)
	var parts []string
	for i := range ms {
		id := fmt.Sprintf("n%d", i)
		ms[i] = &Member{ID: id,
			RPCAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			DataDir:  filepath.Join(base, id),
			Proc:     child.Proc{LogPath: filepath.Join(base, id+".log")},
		}
		parts = append(parts, id+"-"+ms[i].RPCAddr)
		if err := os.MkdirAll(ms[i].DataDir, 0o755); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Members, c.peers, c.keyFile = ms, strings.Join(parts, ";"), keyFile
	return nil
}

func (c *Cluster) Size() int { return len(c.Members) }

// index returns the slot of member id, or -1.
func (c *Cluster) Index(id string) int {
	for i, m := range c.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// others lists every slot except skip (-1: all).
func (c *Cluster) Others(skip int) []int {
	var out []int
	for i := range c.Members {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// startAll starts every member, back to back, so cold start is as simultaneous as exec allows.
func (c *Cluster) StartAll() error {
	for i := range c.Members {
		if err := c.Start(i); err != nil {
			return err
		}
	}
	return nil
}

// start runs member i. Its output is appended to its log file after a marker line, so one
// file tells the story of every incarnation.
func (c *Cluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("benchmark is shutting down")
	}
	m := c.Members[i]
	peers := c.peers
	if c.delay != nil {
		ids := make([]string, len(c.Members))
		for j, o := range c.Members {
			ids[j] = o.ID
		}
		peers = c.delay.Peers(i, ids)
	}
	argv := []string{c.opts.Binary, "server", "--group", c.opts.Group, "--id", m.ID,
		"--peers", peers, "--data-dir", m.DataDir, "--http", m.HTTPAddr, "--key-file", c.keyFile,
		"--profile", c.opts.Profile, "--log-level", c.opts.LogLevel}
	if m.NS != "" {
		argv = inNamespace(m, argv) // see memberNet
	}
	marker := fmt.Sprintf("=== bench: start %s at %s", m.ID, time.Now().Format(time.RFC3339Nano))
	if err := m.Start(exec.Command(argv[0], argv[1:]...), marker); err != nil {
		return fmt.Errorf("start %s: %w", m.ID, err)
	}
	m.paused = false
	c.Note("start %s pid %d", m.ID, m.Pid())
	return nil
}

// note appends one event to dir/bench-events.log as a JSON line shaped like the members' zap
// lines (ts in RFC 3339 UTC with microseconds, self, msg), so merging it with their logs by ts
// (a plain sort of the lines' ts strings) gives one timeline of a run: fault, candidates,
// votes, new leader, agreement seen.
func (c *Cluster) Note(format string, args ...any) {
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
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	m := c.Members[i]
	err := m.Kill()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s: %w", m.ID, err)
	}
	c.Note("kill -9 %s", m.ID)
	<-m.Done
	return nil
}

// pause stops member i with SIGSTOP: a silent failure, its sockets stay open and connected.
func (c *Cluster) Pause(i int) error { return c.signalPause(i, true) }

// resume continues member i with SIGCONT.
func (c *Cluster) Resume(i int) error { return c.signalPause(i, false) }

func (c *Cluster) signalPause(i int, stop bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Members[i]
	if !m.Running() {
		return fmt.Errorf("%s is not running", m.ID)
	}
	if err := pauseProcess(m.Cmd.Process, stop); err != nil {
		return fmt.Errorf("%s: %w", m.ID, err)
	}
	m.paused = stop
	c.Note("%s %s", map[bool]string{true: "SIGSTOP", false: "SIGCONT"}[stop], m.ID)
	return nil
}

// isPaused reports whether member i is stopped by us (it cannot answer, so it is not polled).
func (c *Cluster) isPaused(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Members[i].paused
}

// stopAll kills every running member and waits until each is reaped.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	var waits []chan struct{}
	for _, m := range c.Members {
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
func (c *Cluster) Shutdown() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stopAll()
}

// unexpectedExit reports a member that ended although nobody killed it: a member crash is a
// finding, and measuring on without it would be wrong.
func (c *Cluster) unexpectedExit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for _, m := range c.Members {
		if why := m.Unexpected(); why != "" {
			return fmt.Errorf("member %s %s", m.ID, why)
		}
	}
	return nil
}

// InNamespaces moves the members (all stopped) into network namespaces ns, one each, at
// addresses ips: each rpc address becomes its namespace's address (same port), and the
// address the benchmark polls becomes the member's read-only status listener on that
// address. The admin API stays on the namespace's loopback.
func (c *Cluster) InNamespaces(ns, ips []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for i, mb := range c.Members {
		_, rpcPort, _ := strings.Cut(mb.RPCAddr, "127.0.0.1:")
		_, httpPort, _ := strings.Cut(mb.HTTPAddr, "127.0.0.1:")
		mb.NS = ns[i]
		mb.RPCAddr = ips[i] + ":" + rpcPort
		mb.HTTPAddr = ips[i] + ":" + httpPort
		parts = append(parts, mb.ID+"-"+mb.RPCAddr)
	}
	c.peers = strings.Join(parts, ";")
}

// inNamespace turns a member's command line into one that runs it in its namespace (`ip
// netns exec` execs the server in place, so the pid, the signals and the parent-death signal
// are the server's). The poller reads the member's read-only listener on the namespace's
// address (plain HTTP on a namespace address of this host: --insecure-network-trusted); the
// admin API, which must stay on loopback without a token, moves to the namespace's own
// loopback.
func inNamespace(m *Member, argv []string) []string {
	out := []string{"ip", "netns", "exec", m.NS}
	for i := 0; i < len(argv); i++ {
		if argv[i] == "--http" && i+1 < len(argv) {
			_, port, _ := strings.Cut(argv[i+1], ":")
			out = append(out, "--http", "127.0.0.1:"+port, "--metrics", argv[i+1], "--insecure-network-trusted")
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

// Terminate stops member i with SIGTERM (a clean shutdown) and waits until it has exited; after
// timeout it kills it.
func (c *Cluster) Terminate(i int, timeout time.Duration) error {
	c.mu.Lock()
	m := c.Members[i]
	if !m.Running() {
		c.mu.Unlock()
		return fmt.Errorf("%s is not running", m.ID)
	}
	m.Expected = true
	err := m.Cmd.Process.Signal(syscall.SIGTERM)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("SIGTERM %s: %w", m.ID, err)
	}
	c.Note("SIGTERM %s", m.ID)
	select {
	case <-m.Done:
		return nil
	case <-time.After(timeout):
		c.Note("%s still running %v after SIGTERM: kill -9", m.ID, timeout)
		return c.Kill(i)
	}
}

// PID is member i's process id, or -1 if it is not running.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.Members[i]; m.Running() {
		return m.Cmd.Process.Pid
	}
	return -1
}
