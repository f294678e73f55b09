package compare

import (
	"errors"
	"fmt"
	"github.com/dledger-go/dledger/cmd/dledger/internal/child"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// group owns the member processes of one system. Every start goes through it and shutdown
// kills them all; each member runs in its own process group and dies with this process
// (package child), so nothing outlives the benchmark. A slot keeps its ports and data dir
// across restarts.
type group struct {
	sys   system
	dir   string
	ports [][]int // per member, sys.portsPerMember() loopback ports

	mu     sync.Mutex
	closed bool
	procs  []*child.Proc
}

// newGroup picks ports, lets the system write its configuration under dir and prepares the
// slots; it starts nothing.
func newGroup(sys system, dir string, members int) (*group, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	flat, err := freePorts(members * sys.portsPerMember())
	if err != nil {
		return nil, err
	}
	g := &group{sys: sys, dir: dir}
	for i := 0; i < members; i++ {
		g.ports = append(g.ports, flat[i*sys.portsPerMember():(i+1)*sys.portsPerMember()])
		g.procs = append(g.procs, &child.Proc{LogPath: filepath.Join(dir, fmt.Sprintf("member-%d.log", i))})
	}
	if err := sys.prepare(dir, g.ports); err != nil {
		return nil, fmt.Errorf("%s: %w", sys.name(), err)
	}
	return g, nil
}

func (g *group) size() int { return len(g.procs) }

func (g *group) startAll() error {
	for i := range g.procs {
		if err := g.start(i); err != nil {
			return err
		}
	}
	return nil
}

// start runs member i (first start and restart alike: the systems' commands work on an
// existing data dir). Output is appended to its log after a marker line.
func (g *group) start(i int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errors.New("benchmark is shutting down")
	}
	marker := "=== compare: start at " + time.Now().Format(time.RFC3339Nano)
	if err := g.procs[i].Start(g.sys.command(i), marker); err != nil {
		return fmt.Errorf("start %s member %d: %w", g.sys.name(), i, err)
	}
	return nil
}

// kill is the crash: SIGKILL to member i's process group, then wait until it is reaped.
func (g *group) kill(i int) error {
	g.mu.Lock()
	p := g.procs[i]
	err := p.Kill()
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s member %d: %w", g.sys.name(), i, err)
	}
	<-p.Done
	return nil
}

// pid of member i, or 0 if it is not running.
func (g *group) pid(i int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.procs[i].Pid()
}

// shutdown kills every member, waits until each is reaped and refuses later starts. Safe to
// call repeatedly and from any goroutine.
func (g *group) shutdown() {
	g.mu.Lock()
	g.closed = true
	var waits []chan struct{}
	for _, p := range g.procs {
		if p.Kill() == nil {
			waits = append(waits, p.Done)
		}
	}
	g.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

// unexpectedExit reports a member that ended although nobody killed it.
func (g *group) unexpectedExit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	for i, p := range g.procs {
		if why := p.Unexpected(); why != "" {
			return fmt.Errorf("%s member %d %s", g.sys.name(), i, why)
		}
	}
	return nil
}

// others lists every member index except skip (-1: all).
func (g *group) others(skip int) []int {
	var out []int
	for i := range g.procs {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// freePorts picks n distinct free TCP ports on 127.0.0.1 below the kernel's ephemeral range,
// so no member's outgoing connection can take one as its source port between our check and
// the member's bind.
func freePorts(n int) ([]int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 10*n {
		lo, hi = 10000, 20000
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 10000 {
			return nil, errors.New("cannot find free loopback ports")
		}
		p := lo + rand.IntN(hi-lo)
		if portFree(p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// usedPorts remembers every port handed out in this process, so two groups running side by
// side never get the same one (a stopped member's port is free to the kernel but still ours).
var usedPorts sync.Map

func portFree(p int) bool {
	if _, taken := usedPorts.LoadOrStore(p, true); taken {
		return false
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
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
