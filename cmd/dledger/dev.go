package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
)

// runDev runs a whole group on loopback in one process: the quickest way to watch an election.
func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	members := fs.Int("members", 3, "group size (1 to 7)")
	basePort := fs.Int("base-port", 20911, "rpc port of n0; n1 uses the next one, and so on")
	httpBase := fs.Int("http-base-port", 0, "HTTP admin port of n0, the others follow (default: --base-port + 1000)")
	dir := fs.String("data-dir", "", "keep member data here (default: a temp dir, removed on exit)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (role changes are always printed)")
	timing := addTimingFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	// As for server: exit status 2 for a bad command line (found before anything is created),
	// 1 for a failure while running.
	usage := devExit(stderr, 2)
	fail := devExit(stderr, 1)
	if err := checkDevPorts(*members, *basePort, httpBase); err != nil {
		return usage("%v", err)
	}
	cfg, err := timing.resolve()
	if err != nil {
		return usage("%v", err)
	}
	log, err := newLoggerTo(*logLevel, "console", stderr)
	if err != nil {
		return usage("%v", err)
	}
	defer log.Sync()
	g := &devGroup{peers: devPeers(*members, *basePort), httpBase: *httpBase, cfg: cfg, log: log}
	// Every member shares the timings and peers, so checking one config checks them all (a
	// preferred leader outside the group, say). The key is not known yet (it is written into
	// the data dir, which a bad command line must not create): Insecure stands in for it here.
	if err := (server.Config{Group: "dev", SelfID: "n0", Peers: g.peers, Ledger: server.LedgerNone, Election: cfg,
		Insecure: true}).Validate(); err != nil {
		return usage("%v", err)
	}
	root, cleanup, err := devDataDir(*dir)
	if err != nil {
		return fail("%v", err)
	}
	defer cleanup()
	g.root = root
	if g.keys, err = devKeys(root); err != nil {
		return fail("%v", err)
	}

	var out sync.Mutex
	printf := func(format string, a ...any) {
		out.Lock()
		fmt.Fprintf(stdout, format, a...)
		out.Unlock()
	}
	g.start = time.Now()
	// Role changes are printed in time order, after the member list (roleLog).
	g.roles = newRoleLog(func(line string) { printf("%s", line) })
	defer g.roles.close()
	showRoleChanges := sync.OnceFunc(g.roles.start)
	printf("dledger dev: group %q with %d members, profile %s, data in %s\n", "dev", *members, timing.profile, root)
	for i := 0; i < *members; i++ {
		id := fmt.Sprintf("n%d", i)
		d, reg, err := g.newDaemon(i)
		if err != nil {
			g.stopAll()
			return fail("%s: %v", id, err)
		}
		s, err := g.startMember(id, d, reg)
		if err != nil {
			showRoleChanges() // what the members did before the failure (roles.close prints the rest)
			d.Stop(context.Background())
			g.stopAll()
			return fail("%s: %v", id, err)
		}
		d.Serve()
		g.servers = append(g.servers, s)
		g.daemons = append(g.daemons, d)
		printf("  %s  rpc %s  http http://%s/v1/status\n", id, s.RPCAddr(), d.HTTPAddr())
	}
	g.printHints(printf)
	showRoleChanges()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	return stopOnSignal(sig, log, stderr, "dev", func() error {
		g.roles.flush(time.Now()) // the role changes held so far come before this line
		printf("stopping (Ctrl-C again to exit at once)...\n")
		g.stopAll()
		g.roles.close() // every member's final event, before the exit
		return nil
	})
}

// devExit is a report of dledger dev that ends it with exit status code.
func devExit(stderr io.Writer, code int) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "dledger dev: "+format+"\n", a...)
		return code
	}
}

// checkDevPorts checks that the rpc ports from basePort and the HTTP ports from *httpBase
// (basePort + 1000 when 0, which it fills in) fit members members without overlapping.
func checkDevPorts(members, basePort int, httpBase *int) error {
	if members < 1 || members > 7 {
		return errors.New("--members must be 1..7")
	}
	if *httpBase == 0 {
		*httpBase = basePort + 1000
		if basePort >= 1 && *httpBase+members-1 > 65535 {
			return fmt.Errorf("--base-port %d leaves no room for %d HTTP ports at +1000: set --http-base-port", basePort, members)
		}
	}
	if !portsFit(basePort, members) {
		return fmt.Errorf("--base-port %d leaves no room for %d rpc ports", basePort, members)
	}
	if !portsFit(*httpBase, members) {
		return fmt.Errorf("--http-base-port %d leaves no room for %d HTTP ports", *httpBase, members)
	}
	if *httpBase < basePort+members && basePort < *httpBase+members {
		return fmt.Errorf("--base-port %d and --http-base-port %d overlap for %d members", basePort, *httpBase, members)
	}
	return nil
}

// portsFit says whether n ports from base are all valid port numbers.
func portsFit(base, n int) bool { return base >= 1 && base+n-1 <= 65535 }

// devPeers is the dev group's peers: n0, n1, ... on loopback ports from basePort.
func devPeers(members, basePort int) string {
	var parts []string
	for i := 0; i < members; i++ {
		parts = append(parts, fmt.Sprintf("n%d-127.0.0.1:%d", i, basePort+i))
	}
	return strings.Join(parts, ";")
}

// devDataDir is where the members keep their data: dir, or when it is empty a temporary dir
// that cleanup removes.
func devDataDir(dir string) (root string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	if root, err = os.MkdirTemp("", "dledger-dev-"); err != nil {
		return "", nil, err
	}
	return root, func() { os.RemoveAll(root) }, nil
}

// devGroup is the group dledger dev runs: what every member shares, and the members started.
type devGroup struct {
	peers    string
	httpBase int
	cfg      dledger.Config
	log      *zap.Logger
	root     string
	keys     secure.KeySet
	start    time.Time
	roles    *roleLog
	servers  []*server.Server
	daemons  []*daemon.Daemon
}

// newDaemon is member i's admin API and metrics, its own as three processes would have them.
func (g *devGroup) newDaemon(i int) (*daemon.Daemon, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", g.httpBase+i)
	d, err := daemon.New(daemon.Config{HTTPAddr: httpAddr}, daemon.WithLogger(g.log), daemon.WithRegisterer(reg))
	return d, reg, err
}

// startMember creates member id's server on d (reg its metrics), has d listen and starts the
// server; after a failure the server is not running (d is the caller's to stop).
func (g *devGroup) startMember(id string, d *daemon.Daemon, reg prometheus.Registerer) (*server.Server, error) {
	s, err := server.New(server.Config{Group: "dev", SelfID: id, Peers: g.peers,
		DataDir: fmt.Sprintf("%s/%s", g.root, id), Ledger: server.LedgerNone, Election: g.cfg,
		Keys: g.keys},
		server.WithAttacher(d.Attacher()), server.WithRegisterer(reg),
		server.WithLogger(g.log),
		server.WithListener(func(ev dledger.RoleEvent) {
			at := ev.At
			if at.IsZero() { // a missed marker carries no time of its own
				at = time.Now()
			}
			g.roles.add(at, devRoleLine(id, g.start, ev)+"\n")
		}))
	if err != nil {
		return nil, err
	}
	if err := d.Listen(); err != nil {
		s.Stop(context.Background())
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// stopAll stops the members started, servers first.
func (g *devGroup) stopAll() {
	stopGroup(g.servers)
	for _, d := range g.daemons {
		d.Stop(context.Background())
	}
}

// printHints prints the commands that look at the running group.
func (g *devGroup) printHints(printf func(format string, a ...any)) {
	addrs := make([]string, len(g.daemons))
	for i, d := range g.daemons {
		addrs[i] = d.HTTPAddr()
	}
	self := selfCommand(os.Args[0], os.Executable, exec.LookPath)
	printf("status:   %s status --http %s\n", self, strings.Join(addrs, ","))
	printf("watch:    %s watch --http %s\n", self, addrs[0])
	printf("transfer: %s transfer --http %s --to n1\n", self, addrs[0])
	printf("stop with Ctrl-C; role changes follow:\n")
}

// stopGroup stops every member of a group that goes away as a whole: the followers first, all
// at once, then the leader. Stopped one after another, leader first, each leader would hand
// over to a member about to stop, which would lead a new term for a moment and fire its
// listeners, once per member; a leader stopped first would also make the others campaign.
// Stopped last, the leader finds no live follower to hand over to (and a member that is
// stopping refuses to take leadership anyway: server/stopping.go), so the group stops at the
// term it had, with no role change but each member's final UNKNOWN.
func stopGroup(servers []*server.Server) {
	var leaders, others []*server.Server
	for _, s := range servers {
		if s.Status().Role == protocol.LEADER {
			leaders = append(leaders, s)
		} else {
			others = append(others, s)
		}
	}
	for _, batch := range [][]*server.Server{others, leaders} {
		var wg sync.WaitGroup
		for _, s := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), s.StopTimeout())
				defer cancel()
				s.Stop(ctx)
			}()
		}
		wg.Wait()
	}
}

// selfCommand is how the hints should name this program: "dledger" when that is what PATH
// finds, "go run ./cmd/dledger" when it runs from `go run` (a binary in the go command's
// temporary build dir, gone once it exits), else the path it was started as (bin/dledger).
func selfCommand(arg0 string, executable func() (string, error), lookPath func(string) (string, error)) string {
	exe, err := executable()
	if err != nil {
		return arg0
	}
	if strings.Contains(filepath.ToSlash(exe), "/go-build") && strings.Contains(filepath.ToSlash(exe), "/exe/") {
		return "go run ./cmd/dledger"
	}
	if found, err := lookPath("dledger"); err == nil {
		if a, err := filepath.EvalSymlinks(found); err == nil {
			if b, err := filepath.EvalSymlinks(exe); err == nil && a == b {
				return "dledger"
			}
		}
	}
	return arg0
}

// roleLog prints the members' role changes in the order they happened. Each member's listener
// runs on its own goroutine, so events of different members reach it in any order; it holds
// each line for roleLogDelay and prints the lines due in time order (a line that arrives later
// than that after its event is printed at once: never lost, rarely out of order).
type roleLog struct {
	print func(string)
	mu    sync.Mutex
	lines []roleLine
	wake  chan struct{}
	done  chan struct{}
	once  sync.Once
	on    sync.Once
}

type roleLine struct {
	at   time.Time
	text string
}

// roleLogDelay is how long a role change waits for earlier ones of other members: far longer
// than the listeners' delivery takes, short enough for a person watching.
const roleLogDelay = 100 * time.Millisecond

func newRoleLog(print func(string)) *roleLog {
	return &roleLog{print: print, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// add queues one line; it never blocks (a listener must not).
func (l *roleLog) add(at time.Time, text string) {
	l.mu.Lock()
	l.lines = append(l.lines, roleLine{at, text})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// start begins printing (after the member list, so the first screen reads in order).
func (l *roleLog) start() {
	l.on.Do(func() {
		go func() {
			t := time.NewTicker(roleLogDelay / 4)
			defer t.Stop()
			for {
				select {
				case <-l.done:
					return
				case <-t.C:
				case <-l.wake:
				}
				l.flush(time.Now().Add(-roleLogDelay))
			}
		}()
	})
}

// flush prints, in time order, every queued line of an event at or before upTo.
func (l *roleLog) flush(upTo time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.SliceStable(l.lines, func(i, j int) bool { return l.lines[i].at.Before(l.lines[j].at) })
	n := 0
	for n < len(l.lines) && !l.lines[n].at.After(upTo) {
		l.print(l.lines[n].text)
		n++
	}
	l.lines = l.lines[n:]
}

// close stops the printer and prints what is left, in order.
func (l *roleLog) close() {
	l.once.Do(func() {
		close(l.done)
		l.flush(time.Now().Add(time.Hour))
	})
}

// devKeys is the dev group's key: root/group.key, written on first use, so the members
// authenticate each other as a real group does and a kept --data-dir keeps its key.
func devKeys(root string) (secure.KeySet, error) {
	path := filepath.Join(root, "group.key")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		key, err := secure.GenerateKey()
		if err != nil {
			return secure.KeySet{}, err
		}
		if err := os.MkdirAll(root, 0o700); err != nil {
			return secure.KeySet{}, err
		}
		if err := secure.WriteKeyFile(path, key); err != nil {
			return secure.KeySet{}, err
		}
	}
	return secure.LoadKeyFile(path)
}

// devRoleLine is the line dledger dev prints for member id's role event ev.
func devRoleLine(id string, start time.Time, ev dledger.RoleEvent) string {
	if ev.Missed > 0 { // the printer fell behind its bounded queue (driver.ListenerQueue)
		return fmt.Sprintf("%8s   %s  missed %d role events", "", id, ev.Missed)
	}
	leader, note := ev.LeaderID, ""
	if leader == "" {
		leader = "-"
	}
	if ev.Role == protocol.UNKNOWN {
		note = " (stopped)" // the server's last event: this member leads nothing now
	}
	return fmt.Sprintf("%8.3fs  %s  %-9s term=%d leader=%s%s", ev.At.Sub(start).Seconds(), id, ev.Role, ev.Term, leader, note)
}
