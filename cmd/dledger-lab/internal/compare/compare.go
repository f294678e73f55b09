// Package compare is `dledger-lab compare`: our crash failover side by side with etcd and
// ZooKeeper, each a group of 3 real member processes on 127.0.0.1, measured the same way.
//
// Per set of settings ("matched": the same ~600 ms tolerance to a silent leader; "defaults":
// each system as shipped) all groups run at once. First the idle cost: after a warm-up, CPU
// time (utime + stime from /proc) of every member over an idle window, and its RSS. Then the
// trials, interleaved (trial 1 of each system, trial 2 of each, ...) so that noise on the
// machine hits all alike: wait until the group is steady (every member names the same
// leader), wait a random time within the leader's heartbeat period, kill -9 the leader's
// process group, and poll every survivor every 2 ms until a quorum of the group (2 of 3)
// names the same new leader; then restart the killed member on its data dir and wait until
// the group is steady again.
//
//	compare.go    options, sets, the interleaved loop
//	system.go     what a system provides; agreement and steadiness from members' answers
//	ours.go, etcd.go, zookeeper.go  the three systems: configuration, command, status parser
//	group.go      member processes: start, kill -9, no orphans (ports: package harness)
//	usage.go      /proc parsers for CPU time and RSS
//	stats.go      percentiles, ratios to ours, the table and summary lines
package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/dledger"
)

// Members is the group size of every system: the comparison is 3 members each.
const Members = 3

// The sets of settings.
const (
	// SetMatched gives each system the same tolerance to a silent leader, about 600 ms: ours
	// --profile lan (200 ms x 3), etcd --heartbeat-interval 100 --election-timeout 600,
	// ZooKeeper tickTime=200 syncLimit=3 (initLimit=10, its usual count).
	SetMatched = "matched"
	// SetDefaults runs each system as shipped: ours with no --profile (lan, our default) and
	// with --profile dledger (Java DLedger's defaults, row ours-dledger), etcd without timing
	// flags (100/1000 ms), ZooKeeper with Debian's zoo.cfg (tickTime=2000 initLimit=10
	// syncLimit=5).
	SetDefaults = "defaults"
)

// The systems.
const (
	SysOurs      = "ours"
	SysEtcd      = "etcd"
	SysZooKeeper = "zookeeper"
)

// Options are the flags of `dledger-lab compare`.
type Options struct {
	Sets           []string // SetMatched, SetDefaults, in the order run
	Systems        []string // SysOurs, SysEtcd, SysZooKeeper
	Trials         int      // per system in the matched set
	TrialsDefaults int      // per system in the defaults set
	Binary         string   // our dledger executable; "": this executable
	Etcd           string   // the etcd executable
	Java           string   // the java executable for ZooKeeper
	ZKClassPath    string
	Idle           time.Duration // idle window for CPU time
	IdleWarmup     time.Duration // wait after the groups are steady before the idle window
	Poll           time.Duration // polling period while measuring
	Gap            time.Duration // pause before each trial, so the previous restart's after-effects (JIT, fsync) fade
	Keep           bool          // keep the work dir (member logs, configs) after a successful run
	Out            io.Writer     // progress lines, the table and the summary lines; nil: none

	resolved bool
}

// Resolve checks the options and fills in the defaults.
func (o *Options) Resolve() error {
	if err := o.checkNames(); err != nil {
		return err
	}
	switch {
	case len(o.Sets) == 0 || len(o.Systems) == 0:
		return errors.New("--sets and --systems must name at least one each")
	case o.Trials < 1 || o.TrialsDefaults < 1:
		return fmt.Errorf("--trials %d, --trials-defaults %d: want at least 1", o.Trials, o.TrialsDefaults)
	case harness.CheckPoll(o.Poll) != nil:
		return harness.CheckPoll(o.Poll)
	case o.Idle < 0 || o.IdleWarmup < 0 || o.Gap < 0:
		return errors.New("--idle, --idle-warmup and --gap must not be negative")
	}
	var err error
	if o.Binary, err = harness.ResolveBinary(o.Binary); err != nil {
		return err
	}
	o.resolved = true
	return nil
}

// checkNames checks that every set and system named is known.
func (o *Options) checkNames() error {
	for _, s := range o.Sets {
		if s != SetMatched && s != SetDefaults {
			return fmt.Errorf("--sets: unknown set %q (want %s, %s)", s, SetMatched, SetDefaults)
		}
	}
	for _, s := range o.Systems {
		if s != SysOurs && s != SysEtcd && s != SysZooKeeper {
			return fmt.Errorf("--systems: unknown system %q (want %s, %s, %s)", s, SysOurs, SysEtcd, SysZooKeeper)
		}
	}
	return nil
}

func (o *Options) has(sys string) bool {
	for _, s := range o.Systems {
		if s == sys {
			return true
		}
	}
	return false
}

// entry is a system to run in a set, or why it cannot run here.
type entry struct {
	sys     system
	row     string
	setting string
	missing string
}

// setSystems lists the systems of a set in the order their trials interleave.
func (o *Options) setSystems(set string) []entry {
	var out []entry
	if o.has(SysOurs) {
		profiles := []string{dledger.ProfileLAN}
		if set == SetDefaults {
			profiles = append(profiles, dledger.ProfileDLedger)
		}
		for _, p := range profiles {
			row := SysOurs
			if p != dledger.ProfileLAN {
				row = SysOurs + "-" + p
			}
			s, err := newOurs(row, o.Binary, p)
			if err != nil {
				out = append(out, entry{row: row, missing: err.Error()})
				continue
			}
			out = append(out, entry{sys: s, row: row, setting: s.setting()})
		}
	}
	if o.has(SysEtcd) {
		e := &etcd{binary: o.Etcd}
		if set == SetMatched {
			e.heartbeat, e.election = 100*time.Millisecond, 600*time.Millisecond
		}
		out = append(out, entry{sys: e, row: e.name(), setting: e.setting(), missing: o.findEtcd(e)})
	}
	if o.has(SysZooKeeper) {
		z := &zookeeper{java: o.Java, classpath: o.ZKClassPath, tick: zkDefaultTick,
			initLimit: zkDefaultInitLimit, syncLimit: zkDefaultSyncLimit}
		if set == SetMatched {
			z.tick, z.syncLimit = 200*time.Millisecond, 3
		}
		out = append(out, entry{sys: z, row: z.name(), setting: z.setting(), missing: o.findZooKeeper(z)})
	}
	return out
}

// findEtcd resolves the etcd executable; it returns why etcd cannot run, or "".
func (o *Options) findEtcd(e *etcd) string {
	p, err := exec.LookPath(e.binary)
	if err != nil {
		return fmt.Sprintf("no etcd executable %q (apt-get install etcd-server)", e.binary)
	}
	e.binary = p
	return ""
}

// findZooKeeper resolves java and checks the class path; it returns why ZooKeeper cannot run,
// or "".
func (o *Options) findZooKeeper(z *zookeeper) string {
	p, err := exec.LookPath(z.java)
	if err != nil {
		return fmt.Sprintf("no java executable %q (apt-get install default-jre-headless)", z.java)
	}
	z.java = p
	for _, jar := range strings.Split(z.classpath, ":") {
		if _, err := os.Stat(jar); err != nil {
			return fmt.Sprintf("class path entry %s is missing (apt-get install zookeeper libservlet-api-java libslf4j-java)", jar)
		}
	}
	return ""
}

func (o *Options) trials(set string) int {
	if set == SetDefaults {
		return o.TrialsDefaults
	}
	return o.Trials
}

// Report is what a run leaves besides its printed lines: one summary line per row (the last
// lines it printed) and the work dir with the members' logs, "" once removed.
type Report struct {
	Summaries []string
	Dir       string
}

// Run runs every set and prints a progress line per trial, then the table and one summary
// line per row, to o.Out. The error is nil when every system ran and every trial converged; a
// *harness.IncompleteError when a system was skipped or a trial failed (the table says which)
// or the run broke off; harness.ErrInterrupted (wrapped) when ctx ended; a
// *harness.OptionsError for invalid options.
func Run(ctx context.Context, o Options) (Report, error) {
	if !o.resolved {
		if err := o.Resolve(); err != nil {
			return Report{}, &harness.OptionsError{Err: err}
		}
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	dir, err := os.MkdirTemp("", "dledger-compare-")
	if err != nil {
		return Report{}, err
	}
	r := &runner{opts: o, dir: dir, out: out}
	defer r.shutdown() // no orphans, whatever happens below
	stop := context.AfterFunc(ctx, r.shutdown)
	defer stop()

	fmt.Fprintf(out, "compare: %d members each on 127.0.0.1; sets %s; systems %s; binary %s; work dir %s\n",
		Members, strings.Join(o.Sets, ","), strings.Join(o.Systems, ","), o.Binary, dir)
	var runErr error
	for _, set := range o.Sets {
		if runErr = r.runSet(ctx, set); runErr != nil {
			break
		}
	}
	r.shutdown()
	fmt.Fprintln(out)
	writeTable(out, r.rows)
	fmt.Fprintln(out)
	rep := Report{Dir: dir}
	bad := false
	for _, row := range r.rows {
		line := summaryLine(r.rows, row)
		rep.Summaries = append(rep.Summaries, line)
		fmt.Fprintln(out, line)
		bad = bad || row.skipped != "" || row.stopped != "" || row.failed > 0
	}
	switch {
	case ctx.Err() != nil:
		return rep, harness.Interrupted(dir)
	case runErr != nil:
		return rep, &harness.IncompleteError{Err: runErr, Dir: dir}
	case bad:
		return rep, &harness.IncompleteError{Err: errors.New("some systems were skipped or some trials failed (see the table)"), Dir: dir}
	case !o.Keep:
		os.RemoveAll(dir)
		rep.Dir = ""
	}
	return rep, nil
}

// runner is one run: the rows so far and the groups currently running.
type runner struct {
	opts Options
	dir  string
	out  io.Writer
	rows []*row

	mu     sync.Mutex
	closed bool
	groups []*group
}

// shutdown stops every running group; safe from any goroutine, any number of times.
func (r *runner) shutdown() {
	r.mu.Lock()
	r.closed = true
	gs := r.groups
	r.groups = nil
	r.mu.Unlock()
	for _, g := range gs {
		g.shutdown()
	}
}

// contender is one system running in a set: its group, row, and the leader it has now.
type contender struct {
	g      *group
	row    *row
	client *http.Client
	leader string
	idx    int
	broken bool // could not be brought back to a steady state: no more trials
}

// runSet starts every system of the set side by side, measures their idle cost, then runs the
// trials interleaved. A system that cannot start is skipped with the reason in its row.
func (r *runner) runSet(ctx context.Context, set string) error {
	var cs []*contender
	for _, e := range r.opts.setSystems(set) {
		rw := &row{set: set, system: e.row, setting: e.setting, skipped: e.missing}
		r.rows = append(r.rows, rw)
		if e.missing != "" {
			fmt.Fprintf(r.out, "%s %s: skipped: %s\n", set, e.row, e.missing)
			continue
		}
		c, err := r.launch(ctx, set, e.sys, rw)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			rw.skipped = err.Error()
			fmt.Fprintf(r.out, "%s %s: skipped: %v\n", set, e.row, err)
			continue
		}
		cs = append(cs, c)
	}
	defer func() {
		for _, c := range cs {
			c.g.shutdown()
		}
	}()
	if err := r.measureIdle(ctx, set, cs); err != nil {
		return err
	}
	n := r.opts.trials(set)
	for i := 1; i <= n; i++ {
		for _, c := range cs {
			if c.broken {
				continue
			}
			res, err := r.trial(ctx, c)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				c.broken = true
				c.row.stopped = fmt.Sprintf("stopped at trial %d: %v", i, err)
				fmt.Fprintf(r.out, "%s %s: %s\n", set, c.row.system, c.row.stopped)
				c.g.shutdown()
				continue
			}
			fmt.Fprintf(r.out, "%s trial %d/%d %-12s %s\n", set, i, n, c.row.system, res)
		}
	}
	return nil
}
