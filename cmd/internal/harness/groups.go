package harness

// The many-groups benchmark behind `dledger bench groups` (issue 29's targets): three host
// processes on loopback, each a member of every group, started as `dledger server --config
// FILE` with DLedger's proxy list. One run measures, in order:
//
//	cold start   every host started at once on fresh data dirs; per group, start -> its first
//	             EventBecomesLeader (the host's own log timestamp); cold_p50/p99/max_ms
//	idle         every group stable (GET /v1/groups on every host) and no role event logged
//	             for --settle (the balancer has stopped moving leaders), then --idle of nothing:
//	             CPU of the three processes from /proc/<pid>/stat over the window, RSS, fds,
//	             threads, and groups whose term moved while idle
//	balance      leaders per host at steady state: balance_max_dev_pct
//	crash        kill -9 of the host leading the most groups; per group it led, kill -> the
//	             first EventBecomesLeader at a higher term on another host; crash_p50/p99_ms;
//	             other_term_changes: groups it did not lead whose term changed by the time
//	             the survivors are stable again
//	rejoin       the killed host restarts; time until every group is stable with it, and the
//	             balance --rejoin after its start: balance_rejoin_max_dev_pct; from the hosts'
//	             logs, the time from the restart until every host led within 5 % of
//	             groups/3: rejoin_balanced_ms
//
// Latencies come from the hosts' logs (events with timestamps, read as the files grow), not
// from polling; the state checks (stable, terms, leaders per host) come from the admin API.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// GroupsOptions are the flags of `dledger bench groups`.
type GroupsOptions struct {
	Groups   int
	Runs     int
	Idle     time.Duration // the idle window over which CPU is measured
	Rejoin   time.Duration // how long after the killed host's restart the balance is taken
	Profile  string
	Binary   string
	Timeout  time.Duration // bound of each wait (all led, stable, failed over); 0: default
	JSON     bool          // summaries as JSON objects instead of key=value lines
	Keep     bool
	LogLevel string
	Out      io.Writer
	// Settle is how long no role event (a member becoming candidate or leader) must have been
	// logged before the idle window starts: the balancer's transfers and the cold start's tail
	// are not idle. 0: no wait beyond every group being stable.
	Settle time.Duration
	// OneFailover, if above 0, makes each run the one-group failover instead (groups_one.go):
	// this many kills of a host that leads one group of its N, each measuring that group's
	// failover alone.
	OneFailover int

	cfg      dledger.Config
	resolved bool
}

// Resolve checks the options and fills in the defaults: Timeout GroupsBound, Binary this
// executable.
func (o *GroupsOptions) Resolve() error {
	switch {
	case o.Groups < 1:
		return fmt.Errorf("--groups %d: want at least 1", o.Groups)
	case o.Runs < 1:
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	case o.Idle < time.Second:
		return fmt.Errorf("--idle %v: want at least 1s (the CPU counters tick every 10 ms)", o.Idle)
	case o.Rejoin < 0 || o.Timeout < 0 || o.Settle < 0 || o.OneFailover < 0:
		return errors.New("--rejoin, --settle, --timeout and --one-failover must not be negative")
	}
	if err := checkLogLevel(o.LogLevel); err != nil {
		return err
	}
	if o.LogLevel == "warn" || o.LogLevel == "error" {
		return fmt.Errorf("--log-level %s: want info or debug (the latencies are the elector's info events)", o.LogLevel)
	}
	var err error
	if o.cfg, err = dledger.Profile(o.Profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if o.Timeout == 0 {
		o.Timeout = o.GroupsBound()
	}
	if o.Binary, err = ResolveBinary(o.Binary); err != nil {
		return err
	}
	o.resolved = true
	return nil
}

// GroupsBound is the default bound of each wait: the failover benchmark's generous bound (10 x
// (detection window + longest vote round) + 5 s) plus 50 ms per group, for the hosts' start-up
// work (a member's start writes its vote file) and the admin API's listing of many groups on
// a busy machine.
func (o *GroupsOptions) GroupsBound() time.Duration {
	return 10*(o.cfg.DetectionWindow()+o.cfg.MaxVoteRound()) + 5*time.Second + time.Duration(o.Groups)*50*time.Millisecond
}

// GroupsReport is one run's measures. NaN: not measured (the run stopped before).
type GroupsReport struct {
	Groups, Hosts int
	Profile       string

	ColdP50, ColdP99, ColdMax float64 // ms
	ColdCPU                   float64 // s of CPU, all hosts, from start to every group led
	// ColdAllStarted is the time from the first process start to the last member's
	// EventMemberStarted (ms): the floor of a cold start that no election rule can shorten.
	ColdAllStarted float64

	IdleCPUPct      float64 // % of one core, all hosts together
	IdleUsPerMember float64 // us of CPU per group member per second
	RSSMiB          float64 // max over hosts
	RSSAnonMiB      float64 // its anonymous part, max over hosts (NaN if the kernel does not say)
	FDs, Threads    int     // max over hosts
	IdleTermChanges int
	// IdleSettle: ms from every group stable to the idle window's start (Settle with no role
	// event); IdleRoleEvents: role events logged inside the window (0 if it was really idle).
	IdleSettle     float64
	IdleRoleEvents int

	BalanceDev float64 // % at steady state
	LedMin     int
	LedMax     int

	CrashHost                    int
	CrashGroups                  int
	CrashP50, CrashP99, CrashMax float64 // ms
	OtherTermChanges             int

	RejoinStable     float64 // ms from the restart until every group is stable with it
	BalanceRejoinDev float64 // % Rejoin after the restart
	// RejoinBalanced: ms from the restart until every host leads within BalancedPct of
	// groups/hosts (NaN: not within Rejoin), from the leader events of the hosts' logs.
	RejoinBalanced   float64
	RejoinTermChange int // groups whose term changed from the survivors' stable state to then
	// RejoinFirstLed: ms from the restart until the restarted host first led a group (NaN:
	// not within Rejoin): the rejoin's time before any transfer to it landed (its start,
	// its members heard, the givers' first plans), the rest of RejoinBalanced being the
	// transfers.
	RejoinFirstLed float64
}

func newGroupsReport(o GroupsOptions, hosts int) GroupsReport {
	n := math.NaN()
	return GroupsReport{Groups: o.Groups, Hosts: hosts, Profile: o.Profile, ColdP50: n, ColdP99: n, ColdMax: n, ColdCPU: n, ColdAllStarted: n,
		IdleCPUPct: n, IdleUsPerMember: n, RSSMiB: n, RSSAnonMiB: n, BalanceDev: n, CrashHost: -1, CrashP50: n, CrashP99: n, CrashMax: n,
		RejoinStable: n, BalanceRejoinDev: n, RejoinBalanced: n, FDs: -1, Threads: -1, IdleTermChanges: -1, OtherTermChanges: -1,
		RejoinTermChange: -1, LedMin: -1, LedMax: -1, IdleSettle: n, IdleRoleEvents: -1, RejoinFirstLed: n}
}

// fields are the summary's keys and values, in print order. Scripts parse the line: fields
// are only ever added at the end.
func (r GroupsReport) fields() [][2]any {
	return [][2]any{
		{"groups", r.Groups}, {"hosts", r.Hosts}, {"profile", r.Profile},
		{"idle_cpu_pct", r.IdleCPUPct}, {"rss_mib_per_host", r.RSSMiB},
		{"cold_p99_ms", r.ColdP99}, {"crash_p50_ms", r.CrashP50}, {"crash_p99_ms", r.CrashP99},
		{"other_term_changes", r.OtherTermChanges},
		{"balance_max_dev_pct", r.BalanceDev}, {"balance_rejoin_max_dev_pct", r.BalanceRejoinDev},
		{"cold_p50_ms", r.ColdP50}, {"cold_max_ms", r.ColdMax}, {"cold_cpu_s", r.ColdCPU},
		{"idle_us_per_member_s", r.IdleUsPerMember}, {"fds_per_host", r.FDs}, {"threads_per_host", r.Threads},
		{"idle_term_changes", r.IdleTermChanges}, {"led_min", r.LedMin}, {"led_max", r.LedMax},
		{"crash_host", r.CrashHost}, {"crash_groups", r.CrashGroups}, {"crash_max_ms", r.CrashMax},
		{"rejoin_stable_ms", r.RejoinStable}, {"rejoin_term_changes", r.RejoinTermChange},
		{"cold_all_started_ms", r.ColdAllStarted},
		{"idle_settle_ms", r.IdleSettle}, {"idle_role_events", r.IdleRoleEvents},
		{"rejoin_balanced_ms", r.RejoinBalanced}, {"rejoin_first_led_ms", r.RejoinFirstLed},
		{"rss_anon_mib_per_host", r.RSSAnonMiB},
	}
}

// Line is the run's summary: `bench-groups: key=value ...`.
func (r GroupsReport) Line() string {
	var b strings.Builder
	b.WriteString("bench-groups:")
	for _, f := range r.fields() {
		fmt.Fprintf(&b, " %s=%s", f[0], formatField(f[1]))
	}
	return b.String()
}

// JSON is the run's summary as one JSON object with the line's keys (NaN: null).
func (r GroupsReport) JSON() string {
	var b strings.Builder
	b.WriteString("{")
	for i, f := range r.fields() {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(f[0])
		v := f[1]
		if x, ok := v.(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
			v = nil
		} else if ok {
			v = json.RawMessage(strconv.FormatFloat(x, 'f', 1, 64))
		}
		vb, _ := json.Marshal(v)
		fmt.Fprintf(&b, "%s:%s", k, vb)
	}
	b.WriteString("}")
	return b.String()
}

func formatField(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// groupsHosts is the number of host processes of the benchmark: issue 29 sets three.
const groupsHosts = 3

// RunGroups runs the benchmark o.Runs times, each on fresh hosts and data dirs, and prints
// progress and one summary per run to o.Out. The error is nil when every run measured
// everything; a run that fails stops the benchmark (the hosts are killed, the logs kept).
func RunGroups(ctx context.Context, o GroupsOptions) ([]GroupsReport, error) {
	if !o.resolved {
		if err := o.Resolve(); err != nil {
			return nil, &OptionsError{err}
		}
	}
	out := writerOr(o.Out)
	dir, err := os.MkdirTemp("", "dledger-bench-groups-")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "bench groups: %d groups on %d hosts, profile %s (detection window %v), %d runs, idle window %v; binary %s; logs in %s\n",
		o.Groups, groupsHosts, o.Profile, o.cfg.DetectionWindow(), o.Runs, o.Idle, o.Binary, dir)
	var reps []GroupsReport
	for i := 1; i <= o.Runs; i++ {
		g := &groupsRun{o: o, out: out, run: i, rep: newGroupsReport(o, groupsHosts)}
		if o.OneFailover > 0 {
			one, runErr := g.doOne(ctx, filepath.Join(dir, fmt.Sprintf("run-%d", i)))
			fmt.Fprintln(out, one.Line())
			switch {
			case ctx.Err() != nil:
				return reps, Interrupted(dir)
			case runErr != nil:
				return reps, &IncompleteError{Err: fmt.Errorf("run %d: %w", i, runErr), Dir: dir}
			}
			continue
		}
		runErr := g.do(ctx, filepath.Join(dir, fmt.Sprintf("run-%d", i)))
		reps = append(reps, g.rep)
		if o.JSON {
			fmt.Fprintln(out, g.rep.JSON())
		} else {
			fmt.Fprintln(out, g.rep.Line())
		}
		switch {
		case ctx.Err() != nil:
			return reps, Interrupted(dir)
		case runErr != nil:
			return reps, &IncompleteError{Err: fmt.Errorf("run %d: %w", i, runErr), Dir: dir}
		}
	}
	if !o.Keep {
		os.RemoveAll(dir)
	}
	return reps, nil
}

// groupsRun is one run: its hosts, the events read from their logs, and the measures so far.
type groupsRun struct {
	o     GroupsOptions
	out   io.Writer
	run   int
	rep   GroupsReport
	hosts *Hosts
	logs  *LogFollower
	names []string
	t0    time.Time // the cold start's first process start
	// onLook, if set, is called at each of awaitLeaders' looks (every 10 ms), with its time.
	onLook func(time.Time)
}

func (g *groupsRun) progress(format string, args ...any) {
	fmt.Fprintf(g.out, "run %d/%d: %s\n", g.run, g.o.Runs, fmt.Sprintf(format, args...))
}

// follow makes h this run's hosts: the group names it measures and a follower of the hosts'
// logs, from their current end (the latencies are the hosts' own log events).
func (g *groupsRun) follow(h *Hosts) {
	g.hosts = h
	for i := 0; i < g.o.Groups; i++ {
		g.names = append(g.names, GroupName(i))
	}
	var paths []string
	for _, p := range h.Procs {
		paths = append(paths, p.LogPath)
	}
	g.logs = NewLogFollower(paths)
}

func (g *groupsRun) do(ctx context.Context, dir string) error {
	h, err := NewHosts(dir, HostLayout{Binary: g.o.Binary, Hosts: groupsHosts, Groups: g.o.Groups,
		Profile: g.o.Profile, LogLevel: g.o.LogLevel})
	if err != nil {
		return err
	}
	defer h.Shutdown() // no orphans, whatever happens below
	stop := context.AfterFunc(ctx, h.Shutdown)
	defer stop()
	g.follow(h)

	if err := g.coldStart(ctx); err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	steady, err := g.idle(ctx)
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	survivors, err := g.crash(ctx, steady)
	if err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	if err := g.rejoin(ctx, survivors); err != nil {
		return fmt.Errorf("rejoin: %w", err)
	}
	return nil
}

// coldStart starts every host at once and waits for every group's first leader.
func (g *groupsRun) coldStart(ctx context.Context) error {
	want := make(map[string]int64, len(g.names))
	for _, n := range g.names {
		want[n] = -1 // any term: a first election may be won at term 0
	}
	t0 := time.Now()
	g.t0 = t0
	if err := g.hosts.StartAll(); err != nil {
		return err
	}
	// The cold start's CPU is the hosts' at the last group's election, not when the benchmark,
	// reading the logs once they go quiet (logPacer), saw it: a trail of the hosts' CPU.
	var trail cpuTrail
	g.onLook = func(now time.Time) { trail.add(now, g.hostsCPU()) }
	led, err := g.awaitLeaders(ctx, t0, want, -1, "every group led")
	g.onLook = nil
	if err != nil {
		return fmt.Errorf("%w\n%s", err, g.coldDiagnosis())
	}
	lat := Latencies(led, t0)
	g.rep.ColdP50, g.rep.ColdP99, g.rep.ColdMax = Percentile(lat, 50), Percentile(lat, 99), Percentile(lat, 100)
	if cpu, ok := trail.at(t0.Add(time.Duration(g.rep.ColdMax * float64(time.Millisecond)))); ok {
		g.rep.ColdCPU = cpu.Seconds()
	}
	g.progress("cold start: %d groups led, p50 %.1f ms p99 %.1f ms max %.1f ms, %.2f s of CPU", len(led),
		g.rep.ColdP50, g.rep.ColdP99, g.rep.ColdMax, g.rep.ColdCPU)
	return nil
}

// coldDiagnosis says, per host, how far a cold start that did not finish got, and what the
// hosts spent: the floor that stopped it (members started, leaders, CPU and its kernel part,
// open fds).
func (g *groupsRun) coldDiagnosis() string {
	started, leaders := make([]int, groupsHosts), make([]int, groupsHosts)
	for _, e := range g.logs.Events {
		if e.At.Before(g.t0) {
			continue
		}
		switch e.Msg {
		case dledger.EventMemberStarted:
			started[e.Host]++
		case dledger.EventBecomesLeader:
			leaders[e.Host]++
		}
	}
	var b strings.Builder
	elapsed := time.Since(g.t0)
	for j := range g.hosts.Procs {
		fmt.Fprintf(&b, "  host%d: %d of %d members started, %d elections won", j, started[j], g.o.Groups, leaders[j])
		if pid := g.hosts.PID(j); pid != 0 {
			if u, err := ReadProcUsage(pid); err == nil {
				fmt.Fprintf(&b, "; CPU %.1f s in %.1f s (%.0f %% in the kernel), %d fds, %d threads, RSS %.1f MiB",
					u.CPU.Seconds(), elapsed.Seconds(), 100*u.Sys.Seconds()/max(u.CPU.Seconds(), 1e-9), u.FDs, u.Threads, float64(u.RSS)/(1<<20))
			}
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// awaitLeaders reads the logs until every group of want has an EventBecomesLeader after since
// at a term above want's, on a host other than skip; the bound is o.Timeout. It looks at the
// logs' sizes every 10 ms and reads them as logPacer says: not while they grow fast.
func (g *groupsRun) awaitLeaders(ctx context.Context, since time.Time, want map[string]int64, skip int, what string) (map[string]GroupEvent, error) {
	deadline := time.Now().Add(g.o.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	w := NewLeaderWatch(since, want, skip)
	pace := logPacer{quietFor: logQuietFor, maxLag: logReadLag}
	for {
		now := time.Now()
		if g.onLook != nil {
			g.onLook(now)
		}
		if pace.due(now, g.logs.Sizes()) || now.After(deadline) { // a last read before giving up
			g.logs.Poll()
			w.Add(g.logs.Events)
			if len(w.Led) == len(want) {
				return w.Led, nil
			}
		}
		if err := g.hosts.UnexpectedExit(); err != nil {
			return nil, err
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("%s: after %v, %d of %d groups have no leader (bound: --timeout)", what, g.o.Timeout, len(want)-len(w.Led), len(want))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// awaitStable polls the live hosts' GET /v1/groups until every group is stable (one leader,
// followed by every live member at its term), and returns that snapshot's groups.
func (g *groupsRun) awaitStable(ctx context.Context, what string) ([]GroupState, error) {
	deadline := time.Now().Add(g.o.Timeout)
	period := 100*time.Millisecond + time.Duration(g.o.Groups)*20*time.Microsecond // listing 10,000 groups is not free
	last := "no answer"
	for {
		s, err := g.hosts.Snapshot(ctx)
		if err != nil {
			last = err.Error()
		} else if n := s.Unstable(g.names); n > 0 {
			last = fmt.Sprintf("%d of %d groups not stable", n, len(g.names))
		} else {
			return s.Groups(), nil
		}
		if err := g.hosts.UnexpectedExit(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: not stable after %v: %s", what, g.o.Timeout, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(period):
		}
	}
}

// hostsCPU is the running hosts' CPU (user + system) together; hosts whose /proc cannot be
// read count zero.
func (g *groupsRun) hostsCPU() time.Duration {
	var cpu time.Duration
	for j := range g.hosts.Procs {
		if pid := g.hosts.PID(j); pid != 0 {
			if c, err := ReadProcCPU(pid); err == nil {
				cpu += c
			}
		}
	}
	return cpu
}

// usage reads /proc for every running host (by host index; zero for one that is down).
func (g *groupsRun) usage() ([]ProcUsage, error) {
	us := make([]ProcUsage, len(g.hosts.Procs))
	for j := range g.hosts.Procs {
		pid := g.hosts.PID(j)
		if pid == 0 {
			continue
		}
		u, err := ReadProcUsage(pid)
		if err != nil {
			return nil, err
		}
		us[j] = u
	}
	return us, nil
}

// idle waits for every group to be stable, then measures the idle window, and returns the
// stable state after it (the crash's "before").
func (g *groupsRun) idle(ctx context.Context) ([]GroupState, error) {
	before, err := g.awaitStable(ctx, "after the cold start")
	if err != nil {
		return nil, err
	}
	g.logs.Poll()
	var started []time.Duration
	for _, e := range g.logs.Events {
		if e.Msg == dledger.EventMemberStarted && !e.At.Before(g.t0) {
			started = append(started, e.At.Sub(g.t0))
		}
	}
	if len(started) >= g.o.Groups*groupsHosts {
		g.rep.ColdAllStarted = Percentile(started, 100)
	}
	settled := time.Now()
	if err := g.awaitQuiet(ctx); err != nil {
		return nil, err
	}
	g.rep.IdleSettle = Ms(time.Since(settled))
	g.logs.Poll()
	seen := len(g.logs.Events)
	g.progress("idle window of %v starts (%.0f ms after every group was stable)", g.o.Idle, g.rep.IdleSettle)
	u0, err := g.usage()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(g.o.Idle):
	}
	u1, err := g.usage()
	window := time.Since(start)
	if err != nil {
		return nil, err
	}
	g.logs.Poll()
	g.rep.IdleRoleEvents = roleEvents(g.logs.Events[seen:])
	var cpu time.Duration
	var rss, anon int64
	fds, threads := 0, 0
	for j := range u1 {
		cpu += u1[j].CPU - u0[j].CPU
		rss, fds, threads = max(rss, u1[j].RSS), max(fds, u1[j].FDs), max(threads, u1[j].Threads)
		anon = max(anon, u1[j].RSSAnon)
	}
	if anon >= 0 {
		g.rep.RSSAnonMiB = float64(anon) / (1 << 20)
	}
	g.rep.IdleCPUPct = 100 * cpu.Seconds() / window.Seconds()
	g.rep.IdleUsPerMember = 1e6 * cpu.Seconds() / window.Seconds() / float64(g.o.Groups*groupsHosts)
	g.rep.RSSMiB, g.rep.FDs, g.rep.Threads = float64(rss)/(1<<20), fds, threads
	after, err := g.awaitStable(ctx, "after the idle window")
	if err != nil {
		return nil, err
	}
	g.rep.IdleTermChanges = TermChanges(before, after, nil)
	led := LedBy(after, groupsHosts)
	g.rep.BalanceDev = BalanceDevPct(led, g.o.Groups)
	g.rep.LedMin, g.rep.LedMax = minMax(led)
	g.progress("every member started %.1f ms after the first process start", g.rep.ColdAllStarted)
	g.progress("idle %v (from %.0f ms after every group was stable, %v with no role event): %.2f %% of one core (%.2f us per member-second), RSS max %.1f MiB, %d fds, %d threads; leaders per host %v; %d terms moved, %d role events",
		g.o.Idle, g.rep.IdleSettle, g.o.Settle, g.rep.IdleCPUPct, g.rep.IdleUsPerMember, g.rep.RSSMiB, fds, threads, led, g.rep.IdleTermChanges, g.rep.IdleRoleEvents)
	return after, nil
}

// awaitQuiet waits until no host has logged a role event for o.Settle (the balancer's
// transfers and the cold start's last elections are over), bounded by o.Timeout. It reads the
// logs, not the admin API, so the wait itself costs the hosts nothing.
func (g *groupsRun) awaitQuiet(ctx context.Context) error {
	if g.o.Settle <= 0 {
		return nil
	}
	deadline := time.Now().Add(g.o.Timeout)
	for {
		g.logs.Poll()
		last := g.t0
		for _, e := range g.logs.Events {
			if e.Msg != dledger.EventMemberStarted && e.At.After(last) {
				last = e.At
			}
		}
		quietFor := time.Since(last)
		if quietFor >= g.o.Settle {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %v without a role event within %v (bound: --timeout)", g.o.Settle, g.o.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.o.Settle - quietFor):
		}
	}
}

// roleEvents counts the events of evs that are a change of role (not a member's start).
func roleEvents(evs []GroupEvent) int {
	n := 0
	for _, e := range evs {
		if e.Msg != dledger.EventMemberStarted {
			n++
		}
	}
	return n
}

func minMax(xs []int) (int, int) {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// crash kills the host leading the most groups and measures each of its groups' failover,
// then waits for the survivors to be stable and counts the other groups' term changes.
func (g *groupsRun) crash(ctx context.Context, before []GroupState) ([]GroupState, error) {
	victim, n := MostLed(LedBy(before, groupsHosts))
	g.rep.CrashHost, g.rep.CrashGroups = victim, n
	want := map[string]int64{}
	for _, s := range before {
		if s.LeaderHost == victim {
			want[s.Group] = s.Term
		}
	}
	// A random phase against the heartbeat cycle, as in the failover benchmark: a kill that
	// always lands just after a heartbeat would always wait the whole detection window.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Duration(rand.Int64N(int64(g.o.cfg.HeartBeatInterval)))):
	}
	t0 := time.Now()
	if err := g.hosts.Kill(victim); err != nil {
		return nil, err
	}
	led, err := g.awaitLeaders(ctx, t0, want, victim, fmt.Sprintf("kill -9 of host%d", victim))
	if err != nil {
		return nil, err
	}
	lat := Latencies(led, t0)
	g.rep.CrashP50, g.rep.CrashP99, g.rep.CrashMax = Percentile(lat, 50), Percentile(lat, 99), Percentile(lat, 100)
	after, err := g.awaitStable(ctx, fmt.Sprintf("the survivors of host%d", victim))
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for grp := range want {
		skip[grp] = true
	}
	g.rep.OtherTermChanges = TermChanges(before, after, skip)
	g.progress("kill -9 host%d (led %d groups): failover p50 %.1f ms p99 %.1f ms max %.1f ms; %d other groups changed term",
		victim, n, g.rep.CrashP50, g.rep.CrashP99, g.rep.CrashMax, g.rep.OtherTermChanges)
	return after, nil
}

// rejoin restarts the killed host, waits until every group is stable with it, and takes the
// balance o.Rejoin after the restart.
func (g *groupsRun) rejoin(ctx context.Context, survivors []GroupState) error {
	victim := g.rep.CrashHost
	t0 := time.Now()
	if err := g.hosts.Start(victim); err != nil {
		return err
	}
	if _, err := g.awaitStable(ctx, fmt.Sprintf("host%d's restart", victim)); err != nil {
		return err
	}
	g.rep.RejoinStable = Ms(time.Since(t0))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t0.Add(g.o.Rejoin))):
	}
	after, err := g.awaitStable(ctx, fmt.Sprintf("%v after host%d's restart", g.o.Rejoin, victim))
	if err != nil {
		return err
	}
	led := LedBy(after, groupsHosts)
	g.rep.BalanceRejoinDev = BalanceDevPct(led, g.o.Groups)
	g.rep.RejoinTermChange = TermChanges(survivors, after, nil)
	g.logs.Poll()
	if at, ok := BalancedAt(survivors, g.logs.Events, t0, groupsHosts, g.o.Groups); ok && at.Sub(t0) <= g.o.Rejoin {
		g.rep.RejoinBalanced = Ms(at.Sub(t0))
	}
	if at, ok := FirstLedAt(g.logs.Events, t0, victim); ok && at.Sub(t0) <= g.o.Rejoin {
		g.rep.RejoinFirstLed = Ms(at.Sub(t0))
	}
	g.progress("host%d restarted: every group stable after %.0f ms; its first group led after %.0f ms; every host within %.0f %% after %.0f ms; %v later leaders per host %v; %d groups changed term",
		victim, g.rep.RejoinStable, g.rep.RejoinFirstLed, BalancedPct, g.rep.RejoinBalanced, g.o.Rejoin, led, g.rep.RejoinTermChange)
	return nil
}

// BalancedPct is issue 29's bound on the leader balance: every host within this many percent
// of groups/hosts.
const BalancedPct = 5.0

// leadersOf is each group's leader host (-1: none) and term in gs, and the groups each host
// leads.
func leadersOf(gs []GroupState, hosts int) (map[string]int, map[string]int64, []int) {
	leader := map[string]int{}
	term := map[string]int64{}
	led := make([]int, hosts)
	for _, s := range gs {
		term[s.Group] = s.Term
		leader[s.Group] = -1
		if s.LeaderHost >= 0 && s.LeaderHost < hosts {
			leader[s.Group] = s.LeaderHost
			led[s.LeaderHost]++
		}
	}
	return leader, term, led
}

// BalancedAt replays the leader events of evs from since (EventBecomesLeader, in time order,
// each at a term above the group's known one) over the leaders of from, and returns when every
// host first led within BalancedPct of groups/hosts; false if it never did. The events are the
// hosts' own log lines, never sampled away (cmd/dledger/logsample.go), so it costs the hosts
// nothing to measure.
func BalancedAt(from []GroupState, evs []GroupEvent, since time.Time, hosts, groups int) (time.Time, bool) {
	leader, term, led := leadersOf(from, hosts)
	var les []GroupEvent
	for _, e := range evs {
		if e.Msg == dledger.EventBecomesLeader && !e.At.Before(since) && e.Host >= 0 && e.Host < hosts {
			les = append(les, e)
		}
	}
	slices.SortStableFunc(les, func(a, b GroupEvent) int { return a.At.Compare(b.At) })
	if BalanceDevPct(led, groups) <= BalancedPct {
		return since, true
	}
	for _, e := range les {
		if t, ok := term[e.Group]; ok && e.Term <= t {
			continue
		}
		term[e.Group] = e.Term
		if h, ok := leader[e.Group]; ok && h >= 0 {
			led[h]--
		}
		leader[e.Group] = e.Host
		led[e.Host]++
		if BalanceDevPct(led, groups) <= BalancedPct {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// FirstLedAt is the time of host's first leader event (EventBecomesLeader) from since; false if
// it has none.
func FirstLedAt(evs []GroupEvent, since time.Time, host int) (time.Time, bool) {
	var first time.Time
	for _, e := range evs {
		if e.Msg == dledger.EventBecomesLeader && e.Host == host && !e.At.Before(since) && (first.IsZero() || e.At.Before(first)) {
			first = e.At
		}
	}
	return first, !first.IsZero()
}
