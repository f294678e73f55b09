package compare

import (
	"github.com/dledger-go/dledger/cmd/internal/harness"

	"errors"
	"fmt"
	"github.com/dledger-go/dledger/cmd/internal/child"
	"os"
	"path/filepath"
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
	flat, err := harness.FreePorts(members * sys.portsPerMember())
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
