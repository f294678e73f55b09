// Package bench is the failover benchmark behind `dledger bench failover`: it runs a replica
// group as real member processes on loopback, injects one fault per trial and measures, from
// outside, how long the group is without an agreed leader. Package main parses the flags into
// Options and calls RunFailover; everything else lives here:
//
//	bench.go    options, the trial loop, exit codes
//	cluster.go  member processes: start, kill -9, SIGSTOP/SIGCONT, no orphans
//	watch.go    polling /v1/status, leader agreement, stability
//	metrics.go  /metrics deltas: the vote rounds of a trial
//	phases.go   where the time went, from the members' logs (dledger's Event* messages)
//	stats.go    per-trial records, percentiles, the progress and summary lines
//
// `dledger bench calm` (RunCalm, calm*.go) shares the member processes and the polling: it
// injects faults that must not move leadership and counts leader changes and term increases.
package bench

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
	Keep     bool          // keep the work dir (logs, data dirs) even on success
	LogLevel string        // the members' --log-level
	Group    string

	cfg      dledger.Config // the profile's timings, set by Resolve
	resolved bool
}

// Resolve checks the options and fills in the defaults that depend on the profile: Settle 2 x
// the detection window, Timeout generousBound, Binary this executable.
func (o *Options) Resolve() error {
	var err error
	switch {
	case o.Members < 3 || o.Members > 9:
		return fmt.Errorf("--members %d: want 3 to 9 (a failover needs a quorum left after losing one)", o.Members)
	case o.Trials < 1:
		return fmt.Errorf("--trials %d: want at least 1", o.Trials)
	case !validScenario(o.Scenario):
		return fmt.Errorf("--scenario %q: want one of %s", o.Scenario, strings.Join(scenarios, ", "))
	case o.Poll < time.Millisecond || o.Poll > 10*time.Millisecond:
		return fmt.Errorf("--poll %v: want 1ms to 10ms (coarser polling blurs the measurement)", o.Poll)
	case o.Settle < 0 || o.Timeout < 0:
		return errors.New("--settle and --timeout must not be negative")
	case o.Group == "" || strings.ContainsAny(o.Group, " ;"):
		return fmt.Errorf("--group %q: want a non-empty name without spaces or ';'", o.Group)
	}
	if err := checkLogLevel(o.LogLevel); err != nil {
		return err
	}
	if o.cfg, err = dledger.Profile(o.Profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if o.Settle == 0 {
		o.Settle = 2 * o.cfg.DetectionWindow()
	}
	if o.Timeout == 0 {
		o.Timeout = o.generousBound()
	}
	if err := o.resolveBinary(); err != nil {
		return err
	}
	o.resolved = true
	return nil
}

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
func (o *Options) generousBound() time.Duration {
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
func (o *Options) resolveBinary() error {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this executable (%v); pass --binary", err)
		}
		o.Binary = exe
	}
	fi, err := os.Stat(o.Binary)
	if err != nil {
		return fmt.Errorf("--binary: %v", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("--binary %s: not an executable file", o.Binary)
	}
	return nil
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

// RunFailover runs the trials and prints one progress line per trial and the summary. Exit
// status: 0 all trials converged, 1 some failed or the run broke off, 130 interrupted (ctx
// ended), 2 the options are invalid (if not resolved yet). Cancelling ctx stops the members at
// once.
func RunFailover(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	if !o.resolved {
		if err := o.Resolve(); err != nil {
			fmt.Fprintf(stderr, "dledger bench failover: %v\n", err)
			return 2
		}
	}
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
	b := &bench{opts: o, c: c, out: stdout, poller: newPoller(o.Poll)}
	fmt.Fprintf(stdout, "bench: %s, %d members, profile %s (detection window %v), %d trials; binary %s; logs in %s\n",
		o.Scenario, o.Members, o.Profile, o.cfg.DetectionWindow(), o.Trials, o.Binary, dir)
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
		fmt.Fprintf(stderr, "dledger bench failover: %d of %d trials failed; logs kept in %s\n", b.stats.failed, o.Trials, dir)
		code = 1
	case o.Keep:
		fmt.Fprintf(stderr, "dledger bench failover: logs kept in %s\n", dir)
	default:
		os.RemoveAll(dir)
	}
	return code
}

// bench is one run: options, the member processes, the poller and the results so far.
type bench struct {
	opts   Options
	c      *cluster
	out    io.Writer
	poller *poller
	stats  benchStats
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
	for i := 1; i <= b.opts.Trials; i++ {
		r, err := b.leaderFaultTrial(ctx, leader)
		if errors.Is(err, errLeaderMoved) && b.stats.idleChanges < maxIdleChanges {
			// Not what this trial measures, but worth knowing: count it, settle, try again.
			b.stats.idleChanges++
			fmt.Fprintf(b.out, "trial %d/%d: %v; waiting for a stable group and trying again\n", i, b.opts.Trials, err)
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
	if b.opts.Scenario == ScenarioCrash {
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
// rejoin caused (docs/protocol.md L2 says none).
func (b *bench) restore(ctx context.Context, old, elected leaderKey) (leaderKey, int, error) {
	target := b.c.index(old.id)
	var err error
	if b.opts.Scenario == ScenarioCrash {
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
