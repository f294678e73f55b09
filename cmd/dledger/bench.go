package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// The failover benchmark (`dledger bench failover`) runs a replica group as real member
// processes on loopback, injects one fault per trial and measures, from outside, how long the
// group is without an agreed leader. The pieces:
//
//	bench.go          flags, the trial loop, exit codes
//	bench_cluster.go  member processes: start, kill -9, SIGSTOP/SIGCONT, no orphans
//	bench_watch.go    polling /v1/status, leader agreement, stability, /metrics deltas
//	bench_stats.go    per-trial records, percentiles, the progress and summary lines

const (
	scenarioCrash     = "crash"
	scenarioPause     = "pause"
	scenarioColdStart = "cold-start"
)

var scenarios = []string{scenarioCrash, scenarioPause, scenarioColdStart}

const benchUsage = `usage: dledger bench failover --members 3|5 --trials N --scenario crash|pause|cold-start [--profile lan|dledger] [flags]

Runs the group as real 'dledger server' processes on 127.0.0.1 and, per trial:
  crash       kill -9 the leader, then restart it and wait until the group is stable again
  pause       SIGSTOP the leader (its sockets stay open), then SIGCONT it after the trial
  cold-start  start every member at once on fresh data dirs
and measures the time until a quorum of live members reports the same new leader.
The last line is the summary:
  bench: scenario=S members=N profile=P trials=T p50_ms=A p90_ms=B p99_ms=C max_ms=D detect_ms=E ...
`

// benchOptions are the flags of `dledger bench failover`, resolved.
type benchOptions struct {
	members  int
	trials   int
	scenario string
	profile  string
	cfg      dledger.Config
	binary   string
	poll     time.Duration // status polling period while measuring
	settle   time.Duration // how long to keep watching for needless leader changes
	timeout  time.Duration // a trial that has not converged by then failed
	keep     bool          // keep the work dir (logs, data dirs) even on success
	logLevel string        // the members' --log-level
	group    string
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "dledger bench: name a benchmark: dledger bench failover --members 3 --trials 20 --scenario crash")
		return 2
	}
	switch args[0] {
	case "failover":
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "dledger bench: unknown benchmark %q (known: failover)\n", args[0])
		return 2
	}
	opts, code, ok := parseBenchFlags(args[1:], stderr)
	if !ok {
		return code
	}
	// The members run in their own process group, so a terminal's Ctrl-C reaches only this
	// process; cancelling ctx makes every wait return and the deferred cleanup kill them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return runFailover(ctx, opts, stdout, stderr)
}

// parseBenchFlags parses and checks the flags; on error it prints one line and returns 2.
func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, int, bool) {
	var o benchOptions
	fs := flag.NewFlagSet("bench failover", flag.ContinueOnError)
	fs.IntVar(&o.members, "members", 3, "group size, 3 to 9 (3 and 5 are the standard set)")
	fs.IntVar(&o.trials, "trials", 10, "number of trials")
	fs.StringVar(&o.scenario, "scenario", scenarioCrash, "crash (kill -9 the leader), pause (SIGSTOP the leader) or cold-start")
	fs.StringVar(&o.profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan or dledger")
	fs.StringVar(&o.binary, "binary", "", "the dledger executable to run as members (default: this executable)")
	fs.DurationVar(&o.poll, "poll", 2*time.Millisecond, "status polling period while measuring (1ms-10ms)")
	fs.DurationVar(&o.settle, "settle", 0, "watch this long after convergence for needless leader changes (default 2 x detection window)")
	fs.DurationVar(&o.timeout, "timeout", 0, "a trial not converged by then fails (default 10 x (detection window + max vote round) + 5s)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir (member logs, data dirs) after a successful run")
	fs.StringVar(&o.logLevel, "log-level", "info", "the members' log level (their logs go to files in the work dir)")
	fs.StringVar(&o.group, "group", "bench", "replica group name")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return o, code, false
	}
	if err := o.resolve(); err != nil {
		fmt.Fprintf(stderr, "dledger bench failover: %v\n", err)
		return o, 2, false
	}
	return o, 0, true
}

// resolve checks the flags and fills in the defaults that depend on the profile.
func (o *benchOptions) resolve() error {
	var err error
	switch {
	case o.members < 3 || o.members > 9:
		return fmt.Errorf("--members %d: want 3 to 9 (a failover needs a quorum left after losing one)", o.members)
	case o.trials < 1:
		return fmt.Errorf("--trials %d: want at least 1", o.trials)
	case !validScenario(o.scenario):
		return fmt.Errorf("--scenario %q: want one of %s", o.scenario, strings.Join(scenarios, ", "))
	case o.poll < time.Millisecond || o.poll > 10*time.Millisecond:
		return fmt.Errorf("--poll %v: want 1ms to 10ms (coarser polling blurs the measurement)", o.poll)
	case o.settle < 0 || o.timeout < 0:
		return errors.New("--settle and --timeout must not be negative")
	case o.group == "" || strings.ContainsAny(o.group, " ;"):
		return fmt.Errorf("--group %q: want a non-empty name without spaces or ';'", o.group)
	}
	if _, err := newLogger(o.logLevel, "json"); err != nil {
		return err
	}
	if o.cfg, err = dledger.Profile(o.profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if o.settle == 0 {
		o.settle = 2 * o.cfg.DetectionWindow()
	}
	if o.timeout == 0 {
		o.timeout = o.generousBound()
	}
	return o.resolveBinary()
}

// generousBound is long enough for many failed vote rounds: 10 x (detection window + the
// longest vote round) + 5 s. It bounds a trial (unless --timeout says otherwise) and every
// wait for the group to become stable.
func (o *benchOptions) generousBound() time.Duration {
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

// resolveBinary defaults to this executable: the benchmark builds nothing, it runs the
// `dledger server` it was built with.
func (o *benchOptions) resolveBinary() error {
	if o.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this executable (%v); pass --binary", err)
		}
		o.binary = exe
	}
	fi, err := os.Stat(o.binary)
	if err != nil {
		return fmt.Errorf("--binary: %v", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("--binary %s: not an executable file", o.binary)
	}
	return nil
}

// errLeaderMoved: the leader changed while the group was idle between trials. A stable group
// on loopback should never do that (SPEC L2); it is counted (idle_changes) and the trial redone.
var errLeaderMoved = errors.New("the leader changed while the group was idle")

// maxIdleChanges bounds the redone trials: a group that keeps changing leaders on its own
// cannot be measured.
const maxIdleChanges = 5

// errAborted ends a run early: the group could not be brought back to a stable state, so
// later trials would measure nothing meaningful.
var errAborted = errors.New("aborted")

// runFailover runs the trials and prints one progress line per trial and the summary. Exit
// status: 0 all trials converged, 1 some failed or the run broke off, 130 interrupted.
func runFailover(ctx context.Context, o benchOptions, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "dledger-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "dledger bench failover: %v\n", err)
		return 1
	}
	c := newCluster(o, dir)
	defer c.shutdown() // no orphans, whatever happens below (errors, panics)
	go func() {
		<-ctx.Done() // a signal (or the normal end): stop the members at once, start no more
		c.shutdown()
	}()
	b := &bench{opts: o, c: c, out: stdout, poller: newPoller(o.poll)}
	fmt.Fprintf(stdout, "bench: %s, %d members, profile %s (detection window %v), %d trials; binary %s; logs in %s\n",
		o.scenario, o.members, o.profile, o.cfg.DetectionWindow(), o.trials, o.binary, dir)
	runErr := b.run(ctx)
	c.shutdown()
	fmt.Fprintln(stdout, b.stats.breakdownLine())
	fmt.Fprintln(stdout, b.stats.summaryLine(o))

	code := 0
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "dledger bench failover: interrupted; members stopped; logs kept in %s\n", dir)
		return 130
	case runErr != nil:
		fmt.Fprintf(stderr, "dledger bench failover: %v; logs kept in %s\n", runErr, dir)
		return 1
	case b.stats.failed > 0:
		fmt.Fprintf(stderr, "dledger bench failover: %d of %d trials failed; logs kept in %s\n", b.stats.failed, o.trials, dir)
		code = 1
	case o.keep:
		fmt.Fprintf(stderr, "dledger bench failover: logs kept in %s\n", dir)
	default:
		os.RemoveAll(dir)
	}
	return code
}

// bench is one run: options, the member processes, the poller and the results so far.
type bench struct {
	opts   benchOptions
	c      *cluster
	out    io.Writer
	poller *poller
	stats  benchStats
}

func (b *bench) run(ctx context.Context) error {
	if b.opts.scenario == scenarioColdStart {
		return b.runColdStarts(ctx)
	}
	return b.runLeaderFaults(ctx)
}

// runColdStarts: every trial is a fresh group (fresh data dirs, fresh ports) started at once.
func (b *bench) runColdStarts(ctx context.Context) error {
	for i := 1; i <= b.opts.trials; i++ {
		if err := b.c.layout(fmt.Sprintf("trial-%d", i)); err != nil {
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
	if err := b.c.layout("group"); err != nil {
		return err
	}
	if err := b.c.startAll(); err != nil {
		return err
	}
	leader, _, err := b.awaitStable(ctx, leaderKey{})
	if err != nil {
		return fmt.Errorf("the group never became stable at start-up: %w", err)
	}
	for i := 1; i <= b.opts.trials; i++ {
		r, err := b.leaderFaultTrial(ctx, leader)
		if errors.Is(err, errLeaderMoved) && b.stats.idleChanges < maxIdleChanges {
			// Not what this trial measures, but worth knowing: count it, settle, try again.
			b.stats.idleChanges++
			fmt.Fprintf(b.out, "trial %d/%d: %v; waiting for a stable group and trying again\n", i, b.opts.trials, err)
			if leader, _, err = b.awaitStable(ctx, leaderKey{}); err != nil {
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
func (b *bench) leaderFaultTrial(ctx context.Context, old leaderKey) (trialResult, error) {
	target := b.c.index(old.id)
	live := b.c.others(target)
	if err := b.randomPhase(ctx); err != nil {
		return trialResult{}, err
	}
	if st, err := b.poller.status(ctx, b.c.members[target].httpAddr); err != nil || st.Role != "LEADER" || st.Term != old.term {
		return trialResult{}, fmt.Errorf("%w: %s is no longer leader in term %d (%s term %d, err %v)",
			errLeaderMoved, old.id, old.term, st.Role, st.Term, err)
	}
	before := b.scrapeRounds(live)
	offsets := b.c.logOffsets()
	t0 := time.Now()
	var err error
	if b.opts.scenario == scenarioCrash {
		err = b.c.kill(target)
	} else {
		err = b.c.pause(target)
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
// rejoin caused (SPEC L2 says none).
func (b *bench) restore(ctx context.Context, old, elected leaderKey) (leaderKey, int, error) {
	target := b.c.index(old.id)
	var err error
	if b.opts.scenario == scenarioCrash {
		err = b.c.start(target)
	} else {
		err = b.c.resume(target)
	}
	if err != nil {
		return leaderKey{}, 0, err
	}
	return b.awaitStable(ctx, elected)
}

// coldStartTrial starts every member at once and measures from the first process start until
// a quorum agrees on a leader.
func (b *bench) coldStartTrial(ctx context.Context) (trialResult, error) {
	all := b.c.others(-1)
	t0 := time.Now()
	if err := b.c.startAll(); err != nil {
		return trialResult{}, err
	}
	r, err := b.measure(ctx, all, leaderKey{}, t0, make([]int64, b.c.size()))
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
