// Package calm is `dledger-lab calm`: faults that must not move leadership. Each scenario runs a fresh group
// of real member processes, injects its fault again and again for a duration, and counts what
// the fault should never cause: leader changes, term increases, and term increases by the
// faulted member itself. The target is zero; the benchmark reports, it does not judge.
//
//	calm.go         options, the scenario loop, the report lines
//	failpoints.go   the faults, one harness.Failpoint each, and their schedules
//	calm_track.go   the counting (pure: it sees only the members' status reports)
//	calm_netns.go   network namespaces for flap-link
//	calm_linux.go   ss -K for leader-resets, cgroups for cpu-starved
package calm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// The calm scenarios.
const (
	CalmFlapFollower = "flap-follower" // SIGSTOP/SIGCONT a follower, 0.2 to 3 detection windows at a time
	CalmFlapLink     = "flap-link"     // cut a follower's links and heal them (network namespaces)
	CalmLeaderResets = "leader-resets" // reset every TCP connection of the live leader (ss -K)
	CalmRestartLoop  = "restart-loop"  // kill a follower (kill -9, SIGTERM alternately) and restart it
	CalmCPUStarved   = "cpu-starved"   // a follower limited to a sliver of one CPU (cgroup; else SIGSTOP duty cycle)
	// Issue 35 (links.go): slow links, a leader whose round trip jumps, one slow follower, and
	// a leader's stop-the-world pauses.
	CalmSlowLinks    = "slow-links"
	CalmNoisyLeader  = "noisy-leader"
	CalmSlowFollower = "slow-follower"
	CalmLeaderSTW    = "leader-stw"
	CalmLeaderStall  = "leader-stall" // by name only, not in "all": it moves leadership once per stall
)

// CalmScenarios is the whole set, in the order `--scenario all` runs it.
var CalmScenarios = []string{CalmFlapFollower, CalmFlapLink, CalmLeaderResets, CalmRestartLoop, CalmCPUStarved,
	CalmNoisyLeader, CalmSlowFollower, CalmLeaderSTW, CalmSlowLinks}

// How cpu-starved limits the member.
const (
	CPUMethodAuto    = "auto"    // cgroup if this machine allows it, else sigstop
	CPUMethodCgroup  = "cgroup"  // cgroup v2 cpu.max or v1 cpu.cfs_quota_us
	CPUMethodSIGSTOP = "sigstop" // stopped for dutyStop of every dutyPeriod
)

// The SIGSTOP duty cycle, cpu-starved's fallback: stopped 50 ms of every 100 ms. Unlike a
// CPU quota it also stops the member when it has nothing to do, so it is the harsher of the
// two; the report names the method used.
const (
	dutyStop   = 50 * time.Millisecond
	dutyPeriod = 100 * time.Millisecond
)

// Fault lengths, in detection windows, taken in turn: around the window (where a follower's
// timeout fires) and well past it.
var (
	flapFactors    = []float64{0.2, 0.5, 0.9, 1.1, 1.5, 2, 3}
	restartFactors = []float64{0, 0.3, 0.8, 1.5, 3} // five, so with two kill signals all ten pairs come up
)

// Options are the flags of `dledger-lab calm`.
type Options struct {
	Members   int
	Scenarios []string      // from ParseCalmScenarios
	Profile   string        // the members' timing profile
	Binary    string        // "": this executable
	Duration  time.Duration // how long each scenario injects faults
	Settle    time.Duration // how long to keep counting after the last fault; 0: 2 x detection window
	Poll      time.Duration // status polling period
	Keep      bool
	LogLevel  string
	Group     string
	CPUQuota  float64       // cpu-starved: the member's share of one CPU (cgroup method)
	CPUPeriod time.Duration // cpu-starved: the quota's period (cgroup method)
	CPUMethod string
	// Delay and Jitter: slow-links' one-way delay on every link, delay +- jitter.
	Delay, Jitter time.Duration
	Out           io.Writer // progress and report lines; nil: none

	base     harness.Options // what the shared cluster and poller code needs
	resolved bool
}

// ParseCalmScenarios turns "all" or a comma-separated list into scenario names.
func ParseCalmScenarios(s string) ([]string, error) {
	if s == "all" || s == "" {
		return append([]string(nil), CalmScenarios...), nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		x = strings.TrimSpace(x)
		if !contains(CalmScenarios, x) && x != CalmLeaderStall {
			return nil, fmt.Errorf("--scenario %q: want all or a comma-separated list of %s", x, strings.Join(CalmScenarios, ", "))
		}
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Resolve checks the options and fills in the defaults.
func (o *Options) Resolve() error {
	if err := o.check(); err != nil {
		return err
	}
	// The failover options check the shared flags (profile, binary, log level, group).
	o.base = harness.Options{Members: o.Members, Trials: 1, Scenario: harness.ScenarioCrash, Profile: o.Profile, Binary: o.Binary,
		Poll: o.Poll, Keep: o.Keep, LogLevel: o.LogLevel, Group: o.Group}
	if err := o.base.Resolve(); err != nil {
		return err
	}
	o.Binary = o.base.Binary
	if o.Settle == 0 {
		o.Settle = 2 * o.base.Timings().DetectionWindow()
	}
	o.resolved = true
	return nil
}

// check checks calm's own options.
func (o *Options) check() error {
	switch {
	case o.Members < 3 || o.Members > 9:
		return fmt.Errorf("--members %d: want 3 to 9", o.Members)
	case len(o.Scenarios) == 0:
		return errors.New("--scenario: name at least one")
	case o.Duration < time.Second:
		return fmt.Errorf("--duration %v: want at least 1s", o.Duration)
	case harness.CheckPoll(o.Poll) != nil:
		return harness.CheckPoll(o.Poll)
	case o.Settle < 0:
		return errors.New("--settle must not be negative")
	case o.Delay < 0 || o.Jitter < 0 || o.Jitter > o.Delay:
		return fmt.Errorf("--delay %v --jitter %v: want 0 <= jitter <= delay", o.Delay, o.Jitter)
	}
	if err := o.checkCPU(); err != nil {
		return err
	}
	for _, s := range o.Scenarios {
		if !contains(CalmScenarios, s) && s != CalmLeaderStall {
			return fmt.Errorf("--scenario %q: unknown", s)
		}
	}
	return nil
}

// checkCPU checks cpu-starved's options.
func (o *Options) checkCPU() error {
	switch {
	case o.CPUQuota <= 0 || o.CPUQuota >= 1:
		return fmt.Errorf("--cpu-quota %v: want a share of one CPU between 0 and 1", o.CPUQuota)
	case o.CPUPeriod < time.Millisecond || o.CPUPeriod > time.Second:
		return fmt.Errorf("--cpu-period %v: want 1ms to 1s (the kernel's bounds)", o.CPUPeriod)
	case !contains([]string{CPUMethodAuto, CPUMethodCgroup, CPUMethodSIGSTOP}, o.CPUMethod):
		return fmt.Errorf("--cpu-method %q: want auto, cgroup or sigstop", o.CPUMethod)
	}
	return nil
}

// Report is what a run leaves besides its printed lines: the summary line (the last line it
// printed) and the work dir with the members' logs, "" once removed (nothing counted, no
// Keep).
type Report struct {
	Summary string
	Dir     string
}

// Run runs the scenarios one after the other, each on a fresh group, and prints a line per
// fault, a line per scenario and the set's summary to o.Out. The error is nil when every
// scenario ran or was skipped, whatever it counted (the benchmark reports, it does not judge);
// a *harness.IncompleteError when a scenario broke off (a member exited on its own, the group
// never became stable); harness.ErrInterrupted (wrapped) when ctx ended; a
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
	dir, err := os.MkdirTemp("", "dledger-calm-")
	if err != nil {
		return Report{}, err
	}
	dw := o.base.Timings().DetectionWindow()
	fmt.Fprintf(out, "calm: %s; %d members, profile %s (detection window %v), %v of faults + %v settle each; binary %s; logs in %s\n",
		strings.Join(o.Scenarios, ", "), o.Members, o.Profile, dw, o.Duration, o.Settle, o.Binary, dir)
	var sum calmSummary
	for _, s := range o.Scenarios {
		if ctx.Err() != nil {
			break
		}
		r := runCalmScenario(ctx, o, s, dir, out)
		fmt.Fprintln(out, r.line(o))
		sum.add(r)
	}
	rep := Report{Summary: sum.line(o), Dir: dir}
	fmt.Fprintln(out, rep.Summary)
	switch {
	case ctx.Err() != nil:
		return rep, harness.Interrupted(dir)
	case sum.broken > 0:
		return rep, &harness.IncompleteError{Err: fmt.Errorf("%d scenario(s) broke off", sum.broken), Dir: dir}
	case !o.Keep && sum.counted() == 0:
		os.RemoveAll(dir)
		rep.Dir = ""
	}
	return rep, nil
}

// calmResult is one scenario's outcome.
type calmResult struct {
	scenario string
	skipped  string // why it did not run
	broken   string // why it stopped early
	ran      time.Duration
	faults   int
	counts   calmCounts
	faulted  []string
	// From the members' logs: how often a member gave up on the leader, and how many
	// elections were won. Both are zero in a perfectly calm run; candidacies alone (a
	// same-term probe that found the leader alive) move nothing.
	candidacies, elected int
	notWhole             int    // faults after which the group was not whole again within the bound
	method               string // how the fault was made, when there is a choice
}

func (r calmResult) line(o Options) string {
	head := fmt.Sprintf("calm: scenario=%s members=%d profile=%s", r.scenario, o.Members, o.Profile)
	if r.skipped != "" {
		return head + " skipped=1"
	}
	c := r.counts
	violations := 0
	if c.violation != "" {
		violations = 1
	}
	broken := 0
	if r.broken != "" {
		broken = 1
	}
	return fmt.Sprintf("%s duration_s=%.1f faults=%d leader_changes=%d term_increases=%d faulted_term_increases=%d"+
		" leaderless_ms=%.1f max_leaderless_ms=%.1f candidacies=%d elected=%d not_whole=%d violations=%d broken=%d detect_ms=%d"+
		" max_stall_ms=%.1f method=%s",
		head, r.ran.Seconds(), r.faults, len(c.leaderChanges), c.termSteps, c.faultedSteps,
		harness.Ms(c.leaderless), harness.Ms(c.maxLeaderless), r.candidacies, r.elected, r.notWhole, violations, broken,
		o.base.Timings().DetectionWindow().Milliseconds(), harness.Ms(c.stall.d), orDash(r.method))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, " ", "_")
}

// calmSummary adds up the scenarios.
type calmSummary struct {
	ran, skipped, broken                         int
	faults, elected                              int
	changes, termSteps, faultedSteps, violations int64
}

func (s *calmSummary) add(r calmResult) {
	switch {
	case r.skipped != "":
		s.skipped++
		return
	case r.broken != "":
		s.broken++
	}
	s.ran++
	s.faults += r.faults
	s.elected += r.elected
	s.changes += int64(len(r.counts.leaderChanges))
	s.termSteps += r.counts.termSteps
	s.faultedSteps += r.counts.faultedSteps
	if r.counts.violation != "" {
		s.violations++
	}
}

// counted is whether anything the set should never see happened.
func (s *calmSummary) counted() int64 {
	return s.changes + s.termSteps + s.violations + int64(s.elected)
}

// line is the set's last line; scripts parse it, so fields are only ever added at the end.
func (s *calmSummary) line(o Options) string {
	return fmt.Sprintf("calm: summary members=%d profile=%s scenarios=%d ran=%d skipped=%d broken=%d faults=%d"+
		" leader_changes=%d term_increases=%d faulted_term_increases=%d violations=%d elected=%d",
		o.Members, o.Profile, len(o.Scenarios), s.ran, s.skipped, s.broken, s.faults,
		s.changes, s.termSteps, s.faultedSteps, s.violations, s.elected)
}

// calmRun is one scenario being run.
type calmRun struct {
	o   Options
	b   *harness.Harness
	tr  *calmTracker
	out io.Writer
	dw  time.Duration
	res *calmResult
	// releases undo what the fault prepared (namespaces, a cgroup), after the members are gone.
	releases []func()
}

// runCalmScenario runs one scenario on a fresh group and cleans up after it, whatever happens.
func runCalmScenario(ctx context.Context, o Options, scenario, dir string, out io.Writer) (res calmResult) {
	res.scenario = scenario
	c := harness.NewCluster(o.base, dir)
	if err := c.Layout(scenario); err != nil {
		res.broken = err.Error()
		return res
	}
	r := &calmRun{o: o, b: harness.New(o.base, c), out: out, dw: o.base.Timings().DetectionWindow(), res: &res}
	defer r.release()                          // no orphans; the members go before their network and cgroup
	defer context.AfterFunc(ctx, c.Shutdown)() // a signal stops the members at once

	// What the fault needs from the machine; without it, skip with the reason.
	fp := r.failpoint(scenario)
	if err := fp.Available(); err != nil {
		res.skipped = err.Error()
		fmt.Fprintf(out, "calm: %s skipped: %s\n", scenario, res.skipped)
		return res
	}
	if err := c.StartAll(); err != nil {
		res.broken = err.Error()
		return res
	}
	leader, _, err := r.b.AwaitStable(ctx, harness.Leader{})
	if err != nil {
		res.broken = "the group never became stable at start-up: " + err.Error()
		return res
	}
	offsets := c.LogOffsets()
	start := time.Now()
	r.tr = newCalmTracker(c.Size(), leader, start)
	c.Note("calm %s: start, leader %s", scenario, leader)
	watchErr, faultErr := r.inject(ctx, fp, start.Add(o.Duration))
	res.ran = time.Since(start)
	res.counts = r.tr.result(time.Now())
	res.candidacies, res.elected = countEvents(c, offsets)
	for id := range r.tr.faulted {
		res.faulted = append(res.faulted, id)
	}
	sort.Strings(res.faulted)
	switch {
	case ctx.Err() != nil:
	case watchErr != nil && !errors.Is(watchErr, context.Canceled):
		res.broken = watchErr.Error()
	case faultErr != nil && !errors.Is(faultErr, context.Canceled):
		res.broken = faultErr.Error()
	}
	if res.broken != "" {
		fmt.Fprintf(out, "calm: %s broke off: %s\n", scenario, res.broken)
	}
	r.describe()
	return res
}

// inject runs the fault until end while every member's reports are counted in the background,
// then keeps counting for the settle window. It returns the watch's error (a member exited on
// its own: that also stops the fault) and the fault's.
func (r *calmRun) inject(ctx context.Context, fp harness.Failpoint, end time.Time) (watchErr, faultErr error) {
	c := r.b.Cluster()
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchErr = r.b.Watch(wctx, c.Others(-1), r.o.Poll, time.Now().Add(100*time.Hour), func(ob harness.Observation) bool {
			r.tr.observe(ob)
			return false
		})
		if !errors.Is(watchErr, context.Canceled) {
			stopWatch() // a member exited on its own: stop the faults too
		}
	}()
	faultErr = fp.Inject(wctx, end)
	if faultErr == nil {
		// Late effects count too: keep watching for the settle window after the last fault.
		sleepCtx(wctx, r.o.Settle)
	}
	stopWatch()
	wg.Wait()
	return watchErr, faultErr
}

// release stops the members, then undoes what the fault prepared.
func (r *calmRun) release() {
	r.b.Cluster().Shutdown()
	for _, f := range r.releases {
		f()
	}
}

// describe prints what a scenario counted beyond zero, for the reader of the run.
func (r *calmRun) describe() {
	c := r.res.counts
	if len(c.leaderChanges) > 0 {
		fmt.Fprintf(r.out, "calm: %s: agreed leaders after the start: %v\n", r.res.scenario, c.leaderChanges)
	}
	if c.termSteps > 0 {
		var parts []string
		for _, id := range sortedKeys(c.termRaisers) {
			parts = append(parts, fmt.Sprintf("%s +%d", id, c.termRaisers[id]))
		}
		fmt.Fprintf(r.out, "calm: %s: term raised to %d, first reported by: %s (faulted: %s)\n", r.res.scenario,
			c.maxTerm, strings.Join(parts, ", "), strings.Join(r.res.faulted, ", "))
	}
	if c.violation != "" {
		fmt.Fprintf(r.out, "calm: %s: SAFETY: %s\n", r.res.scenario, c.violation)
	}
	if c.stall.d >= r.dw/2 || len(c.leaderChanges) > 0 || c.termSteps > 0 || r.res.elected > 0 {
		fmt.Fprintf(r.out, "calm: %s: longest silence of a member never faulted: %s, %.0f ms, ended %s\n", r.res.scenario,
			c.stall.member, harness.Ms(c.stall.d), c.stall.end.UTC().Format("15:04:05.000"))
	}
}

func sortedKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// countEvents counts the candidacies and won elections in the members' logs since offsets.
func countEvents(c *harness.Cluster, offsets []int64) (candidacies, elected int) {
	for i, m := range c.Members {
		harness.ReadLogLines(m.LogPath, offsets[i], func(l harness.LogLine) {
			switch l.Msg {
			case dledger.EventBecomesCandidate:
				candidacies++
			case dledger.EventBecomesLeader:
				elected++
			}
		})
	}
	return candidacies, elected
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// scaled is f detection windows, +-10 % so faults do not line up with the heartbeat cycle.
func (r *calmRun) scaled(f float64) time.Duration {
	return time.Duration(f * float64(r.dw) * (0.9 + 0.2*rand.Float64()))
}

// between is a uniform random duration in [lo, hi) detection windows.
func (r *calmRun) between(lo, hi float64) time.Duration {
	return time.Duration((lo + (hi-lo)*rand.Float64()) * float64(r.dw))
}

// follower picks the member to fault: prev while it still follows, else the first member
// that is not the agreed leader. Every member faulted is marked, so its term steps count.
func (r *calmRun) follower(prev int) int {
	leader := r.tr.current().ID
	pick := prev
	if pick < 0 || r.b.Cluster().Members[pick].ID == leader {
		for i, m := range r.b.Cluster().Members {
			if m.ID != leader {
				pick = i
				break
			}
		}
	}
	r.tr.markFaulted(r.b.Cluster().Members[pick].ID)
	return pick
}

// awaitWhole waits until every member answers and follows one leader, so the next fault hits
// a group in its steady state; after the generous bound it notes the fault and goes on.
func (r *calmRun) awaitWhole(ctx context.Context) {
	deadline := time.Now().Add(r.o.base.GenerousBound())
	for time.Now().Before(deadline) {
		if _, ok := r.tr.whole(r.b.Cluster().Size()); ok {
			return
		}
		if !sleepCtx(ctx, harness.StablePoll) {
			return
		}
	}
	r.res.notWhole++
}

// progress prints one fault and the counts so far.
func (r *calmRun) progress(what string) {
	c := r.tr.result(time.Now())
	fmt.Fprintf(r.out, "%s #%d: %s; leader %s; leader_changes=%d term_increases=%d faulted_term_increases=%d\n",
		r.res.scenario, r.res.faults, what, r.tr.current(), len(c.leaderChanges), c.termSteps, c.faultedSteps)
}

// resetLeader destroys the leader's end of every TCP connection but the poller's: its rpc
// connections to and from the other members.
func (r *calmRun) resetLeader(l int) (int, error) {
	c := r.b.Cluster()
	m := c.Members[l]
	pid := c.PID(l)
	if pid < 0 {
		return 0, fmt.Errorf("leader %s is not running", m.ID)
	}
	conns, err := processConns(pid, portOf(m.HTTPAddr))
	if err != nil {
		return 0, fmt.Errorf("sockets of %s: %w", m.ID, err)
	}
	if len(conns) == 0 {
		return 0, nil // between a reset and the redials: nothing to reset this time
	}
	n, err := resetConns(conns)
	c.Note("reset %d of %d tcp connections of %s", n, len(conns), m.ID)
	return n, err
}

func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	var p int
	fmt.Sscanf(addr[i+1:], "%d", &p)
	return p
}

// starve limits one follower's CPU for the whole duration: in the cgroup if there is one,
// else by the SIGSTOP duty cycle. It lets the member go at the end.
func (r *calmRun) starve(ctx context.Context, end time.Time, cg *cpuCgroup) error {
	c := r.b.Cluster()
	f := r.follower(-1)
	id := c.Members[f].ID
	pid := c.PID(f)
	if cg != nil {
		if err := cg.add(pid); err != nil {
			return fmt.Errorf("move %s into %s: %w", id, cg, err)
		}
		c.Note("%s starved in %s", id, cg)
		r.res.faults = 1
		for next := time.Now().Add(10 * time.Second); time.Now().Before(end) && ctx.Err() == nil; next = next.Add(10 * time.Second) {
			sleepCtx(ctx, min(time.Until(next), time.Until(end)))
			periods, throttled, d := cg.throttled()
			r.progress(fmt.Sprintf("%s starved; throttled in %d of %d periods, %.0f ms in all", id, throttled, periods, harness.Ms(d)))
		}
		periods, throttled, d := cg.throttled()
		r.res.method += fmt.Sprintf(" throttled %d/%d periods %.0f ms", throttled, periods, harness.Ms(d))
		return cg.release(pid)
	}
	report := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) && ctx.Err() == nil {
		if err := c.Pause(f); err != nil {
			return err
		}
		r.tr.forget(f, time.Now())
		sleepCtx(ctx, dutyStop)
		if err := c.Resume(f); err != nil {
			return err
		}
		r.res.faults++
		sleepCtx(ctx, dutyPeriod-dutyStop)
		if time.Now().After(report) {
			report = report.Add(10 * time.Second)
			r.progress(fmt.Sprintf("%s stopped %v of every %v", id, dutyStop, dutyPeriod))
		}
	}
	return nil
}
