// Package harness is the equipment the benchmarks share, and the failover benchmark behind
// `dledger bench failover`. It runs a replica group as real member processes on loopback and
// watches it from outside; the lab's benchmarks (cmd/dledger-lab: calm, compare) use the same
// pieces. Each benchmark is a Run(ctx, opts) (Report, error) whose errors are typed (ExitCode
// maps them to the commands' exit statuses); none exits the process.
//
//	failover.go the failover benchmark: options, the trial loop
//	cluster.go  member processes: start, kill -9, SIGSTOP/SIGCONT, SIGTERM, no orphans
//	ports.go    free loopback ports below the ephemeral range
//	leader.go   "a quorum agrees on a leader" and "the group is stable", for any system
//	watch.go    polling /v1/status, the failover's tracker, waiting for stability
//	failpoint.go  the Failpoint interface the lab's faults implement
//	errors.go   the typed errors of a run, and their exit statuses
//	metrics.go  /metrics deltas: the vote rounds of a trial
//	phases.go   where the time went, from the members' logs (dledger's Event* messages)
//	stats.go    per-trial records, percentiles, the progress and summary lines
//
// and the many-groups benchmark behind `dledger bench groups`:
//
//	groups.go     its options, the run (cold start, idle, crash, rejoin) and the summary line
//	hosts.go      host processes of many groups: `dledger server --config` with configs:
//	snapshot.go   GET /v1/groups of every host folded into one state per group; balance
//	hostevents.go the elector's events read from the hosts' logs as they grow
//	procstat.go   CPU, RSS, threads and fds of a process from /proc
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger"
)

// The scenarios: which fault each trial injects.
const (
	ScenarioCrash     = "crash"      // kill -9 the leader, restart it after the trial
	ScenarioPause     = "pause"      // SIGSTOP the leader, SIGCONT it after the trial
	ScenarioColdStart = "cold-start" // start every member at once on fresh data dirs
)

var scenarios = []string{ScenarioCrash, ScenarioPause, ScenarioColdStart}

// Options are the flags of `dledger bench failover`. Resolve checks them and fills in the
// defaults that depend on the profile; its errors name the flags.
type Options struct {
	Members  int
	Trials   int
	Scenario string
	Profile  string        // the members' timing profile (dledger.Profile)
	Binary   string        // the dledger executable run as members; "": this executable
	Poll     time.Duration // status polling period while measuring
	Settle   time.Duration // how long to keep watching for needless leader changes; 0: default
	Timeout  time.Duration // a trial that has not converged by then failed; 0: default
	// Warm is how long the group runs stable before each fault (0: none). The adaptive
	// detector (docs/protocol.md 14) keeps the profile's window on a link until it has heard
	// 8 heartbeats on it, so a member restored just before a fault still waits the whole
	// window: Warm measures the steady state, where every link has adapted.
	Warm     time.Duration
	Keep     bool   // keep the work dir (logs, data dirs) even on success
	LogLevel string // the members' --log-level
	Group    string
	Out      io.Writer // progress and summary lines; nil: none

	cfg      dledger.Config // the profile's timings, set by Resolve
	resolved bool
}

// Resolve checks the options and fills in the defaults that depend on the profile: Settle 2 x
// the detection window, Timeout generousBound, Binary this executable.
func (o *Options) Resolve() error {
	if err := o.check(); err != nil {
		return err
	}
	var err error
	if o.cfg, err = dledger.Profile(o.Profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if o.Settle == 0 {
		o.Settle = 2 * o.cfg.DetectionWindow()
	}
	if o.Timeout == 0 {
		o.Timeout = o.GenerousBound()
	}
	if o.Binary, err = ResolveBinary(o.Binary); err != nil {
		return err
	}
	o.resolved = true
	return nil
}

// check checks the options that need nothing resolved, in flag order.
func (o *Options) check() error {
	switch {
	case o.Members < 3 || o.Members > 9:
		return fmt.Errorf("--members %d: want 3 to 9 (a failover needs a quorum left after losing one)", o.Members)
	case o.Trials < 1:
		return fmt.Errorf("--trials %d: want at least 1", o.Trials)
	case !validScenario(o.Scenario):
		return fmt.Errorf("--scenario %q: want one of %s", o.Scenario, strings.Join(scenarios, ", "))
	}
	if err := CheckPoll(o.Poll); err != nil {
		return err
	}
	switch {
	case o.Settle < 0 || o.Timeout < 0 || o.Warm < 0:
		return errors.New("--settle, --timeout and --warm must not be negative")
	case o.Group == "" || strings.ContainsAny(o.Group, " ;"):
		return fmt.Errorf("--group %q: want a non-empty name without spaces or ';'", o.Group)
	}
	return checkLogLevel(o.LogLevel)
}

// CheckPoll bounds a status polling period (--poll): coarser polling blurs the measurement.
func CheckPoll(d time.Duration) error {
	if d < time.Millisecond || d > 10*time.Millisecond {
		return fmt.Errorf("--poll %v: want 1ms to 10ms (coarser polling blurs the measurement)", d)
	}
	return nil
}

// Timings are the members' timings, from the profile (valid after Resolve).
func (o *Options) Timings() dledger.Config { return o.cfg }

// checkLogLevel accepts what the members' --log-level accepts (zap's level names), so a typo
// fails here, not in every member at its first start.
func checkLogLevel(level string) error {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return nil
}

// generousBound is long enough for many failed vote rounds: 10 x (detection window + the
// longest vote round) + 5 s. It bounds a trial (unless --timeout says otherwise) and every
// wait for the group to become stable.
func (o *Options) GenerousBound() time.Duration {
	return 10*(o.cfg.DetectionWindow()+o.cfg.MaxVoteRound()) + 5*time.Second
}

func validScenario(s string) bool {
	for _, x := range scenarios {
		if s == x {
			return true
		}
	}
	return false
}

// ResolveBinary checks the dledger executable run as members (--binary); "" is this
// executable: the failover benchmark builds nothing, it runs the `dledger server` it was built
// with.
func ResolveBinary(path string) (string, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("cannot find this executable (%v); pass --binary", err)
		}
		path = exe
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--binary: %v", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("--binary %s: not an executable file", path)
	}
	return path, nil
}

// errLeaderMoved: the leader changed while the group was idle between trials. A stable group
// on loopback should never do that (docs/protocol.md L2); it is counted (idle_changes) and the trial redone.
var errLeaderMoved = errors.New("the leader changed while the group was idle")

// maxIdleChanges bounds the redone trials: a group that keeps changing leaders on its own
// cannot be measured.
const maxIdleChanges = 5

// errAborted ends a run early: the group could not be brought back to a stable state, so
// later trials would measure nothing meaningful.
var errAborted = errors.New("aborted")

// Report is what a run leaves besides its printed lines: its summary line (the last line it
// printed) and the work dir with the members' logs, "" once removed (a clean run without
// Keep).
type Report struct {
	Summary string
	Dir     string
}

// RunFailover runs the trials and prints one progress line per trial and the summary to o.Out.
// The error is nil when every trial converged, a *OptionsError for invalid options (if not
// resolved yet), ErrInterrupted (wrapped) when ctx ended, and an *IncompleteError when trials
// failed or the run broke off. Cancelling ctx stops the members at once.
func RunFailover(ctx context.Context, o Options) (Report, error) {
	if !o.resolved {
		if err := o.Resolve(); err != nil {
			return Report{}, &OptionsError{err}
		}
	}
	out := writerOr(o.Out)
	dir, err := os.MkdirTemp("", "dledger-bench-")
	if err != nil {
		return Report{}, err
	}
	c := NewCluster(o, dir)
	defer c.Shutdown() // no orphans, whatever happens below (errors, panics)
	go func() {
		<-ctx.Done() // a signal (or the normal end): stop the members at once, start no more
		c.Shutdown()
	}()
	b := &bench{Harness: New(o, c), out: out}
	fmt.Fprintf(out, "bench: %s, %d members, profile %s (detection window %v), %d trials; binary %s; logs in %s\n",
		o.Scenario, o.Members, o.Profile, o.cfg.DetectionWindow(), o.Trials, o.Binary, dir)
	runErr := b.run(ctx)
	c.Shutdown()
	rep := Report{Summary: b.stats.summaryLine(o), Dir: dir}
	fmt.Fprintln(out, b.stats.breakdownLine())
	fmt.Fprintln(out, rep.Summary)
	switch {
	case ctx.Err() != nil:
		return rep, Interrupted(dir)
	case runErr != nil:
		return rep, &IncompleteError{Err: runErr, Dir: dir}
	case b.stats.failed > 0:
		return rep, &IncompleteError{Err: fmt.Errorf("%d of %d trials failed", b.stats.failed, o.Trials), Dir: dir}
	case !o.Keep:
		os.RemoveAll(dir)
		rep.Dir = ""
	}
	return rep, nil
}

// writerOr is w, or io.Discard if w is nil.
func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Harness is a group under test and the means to watch it: the options it was made with, its
// member processes and the status poller.
type Harness struct {
	opts   Options
	c      *Cluster
	poller *poller
}

// New watches cluster c, made with options o, polling every o.Poll.
func New(o Options, c *Cluster) *Harness { return &Harness{opts: o, c: c, poller: NewPoller(o.Poll)} }

// Cluster is the group's member processes.
func (h *Harness) Cluster() *Cluster { return h.c }

// bench is one failover run: the group and the results so far.
type bench struct {
	*Harness
	out   io.Writer
	stats benchStats
}

func (b *bench) run(ctx context.Context) error {
	if b.opts.Scenario == ScenarioColdStart {
		return b.runColdStarts(ctx)
	}
	return b.runLeaderFaults(ctx)
}

// runColdStarts: every trial is a fresh group (fresh data dirs, fresh ports) started at once.
func (b *bench) runColdStarts(ctx context.Context) error {
	for i := 1; i <= b.opts.Trials; i++ {
		if err := b.c.Layout(fmt.Sprintf("trial-%d", i)); err != nil {
			return err
		}
		r, err := b.coldStartTrial(ctx)
		b.c.stopAll()
		if err != nil {
			return err
		}
		b.record(i, r)
	}
	return nil
}

// runLeaderFaults: one group for the whole run; every trial fails its current leader and
// then restores it, so the next trial starts from a whole, stable group.
func (b *bench) runLeaderFaults(ctx context.Context) error {
	if err := b.c.Layout("group"); err != nil {
		return err
	}
	if err := b.c.StartAll(); err != nil {
		return err
	}
	leader, _, err := b.AwaitStable(ctx, Leader{})
	if err != nil {
		return fmt.Errorf("the group never became stable at start-up: %w", err)
	}
	for i := 1; i <= b.opts.Trials; i++ {
		r, err := b.leaderFaultTrial(ctx, leader)
		if errors.Is(err, errLeaderMoved) && b.stats.idleChanges < maxIdleChanges {
			// Not what this trial measures, but worth knowing: count it, settle, try again.
			b.stats.idleChanges++
			fmt.Fprintf(b.out, "trial %d/%d: %v; waiting for a stable group and trying again\n", i, b.opts.Trials, err)
			if leader, _, err = b.AwaitStable(ctx, Leader{}); err != nil {
				return err
			}
			i--
			continue
		}
		if err != nil {
			return err
		}
		// Restore the failed member and wait for one leader followed by everyone. A failed
		// trial still needs the group whole again before the next one.
		next, rejoin, err := b.restore(ctx, leader, r.key)
		r.rejoinChanges = rejoin
		b.record(i, r)
		if err != nil {
			return fmt.Errorf("after trial %d: %w: %w", i, errAborted, err)
		}
		leader = next
	}
	return nil
}

// leaderFaultTrial fails the current leader (kill -9 or SIGSTOP) and measures until a quorum
// of the live members agrees on a new leader, then watches the settle window.
func (b *bench) leaderFaultTrial(ctx context.Context, old Leader) (trialResult, error) {
	target := b.c.Index(old.ID)
	live := b.c.Others(target)
	if b.opts.Warm > 0 && !sleepFor(ctx, b.opts.Warm) {
		return trialResult{}, ctx.Err()
	}
	if err := b.randomPhase(ctx); err != nil {
		return trialResult{}, err
	}
	if st, err := b.poller.status(ctx, b.c.Members[target].HTTPAddr); err != nil || st.Role != "LEADER" || st.Term != old.Term {
		return trialResult{}, fmt.Errorf("%w: %s is no longer leader in term %d (%s term %d, err %v)",
			errLeaderMoved, old.ID, old.Term, st.Role, st.Term, err)
	}
	before := b.scrapeRounds(live)
	offsets := b.c.LogOffsets()
	t0 := time.Now()
	var err error
	if b.opts.Scenario == ScenarioCrash {
		err = b.c.Kill(target)
	} else {
		err = b.c.Pause(target)
	}
	if err != nil {
		return trialResult{}, err
	}
	r, err := b.measure(ctx, live, old, t0, offsets)
	if err != nil {
		return r, err
	}
	r.rounds = b.scrapeRounds(live).minus(before)
	return r, nil
}

// randomPhase waits a random time in [0, heartbeat interval) so faults hit every point of the
// heartbeat cycle alike. Without it the fault lands just after a heartbeat every time, and
// every failover takes the whole detection window: awaitStable returns one heartbeat interval
// after the group became unanimous, which is itself the moment a heartbeat arrived.
func (b *bench) randomPhase(ctx context.Context) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(b.opts.cfg.HeartBeatInterval))))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restore brings the failed member back (restart after kill -9, SIGCONT after SIGSTOP) and
// waits until the group is stable. It returns the leader and how many leader changes the
// rejoin caused (docs/protocol.md L2 says none).
func (b *bench) restore(ctx context.Context, old, elected Leader) (Leader, int, error) {
	target := b.c.Index(old.ID)
	var err error
	if b.opts.Scenario == ScenarioCrash {
		err = b.c.Start(target)
	} else {
		err = b.c.Resume(target)
	}
	if err != nil {
		return Leader{}, 0, err
	}
	return b.AwaitStable(ctx, elected)
}

// coldStartTrial starts every member at once and measures from the first process start until
// a quorum agrees on a leader.
func (b *bench) coldStartTrial(ctx context.Context) (trialResult, error) {
	all := b.c.Others(-1)
	t0 := time.Now()
	if err := b.c.StartAll(); err != nil {
		return trialResult{}, err
	}
	r, err := b.measure(ctx, all, Leader{}, t0, make([]int64, b.c.Size()))
	if err != nil {
		return r, err
	}
	r.rounds = b.scrapeRounds(all)
	return r, nil
}

// record adds a trial to the statistics and prints its progress line.
func (b *bench) record(i int, r trialResult) {
	b.stats.add(r)
	fmt.Fprintln(b.out, r.progressLine(i, b.opts))
}

// sleepFor waits d, or until ctx ends (false).
func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
