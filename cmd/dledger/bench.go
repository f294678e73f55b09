package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/cmd/dledger/internal/bench"
	"github.com/dledger-go/dledger/dledger"
)

// `dledger bench failover`: the flags are parsed here; the benchmark itself is package
// cmd/dledger/internal/bench.

const benchUsage = `usage: dledger bench failover --members 3|5 --trials N --scenario crash|pause|cold-start [--profile lan|dledger] [flags]

Runs the group as real 'dledger server' processes on 127.0.0.1 and, per trial:
  crash       kill -9 the leader, then restart it and wait until the group is stable again
  pause       SIGSTOP the leader (its sockets stay open), then SIGCONT it after the trial
  cold-start  start every member at once on fresh data dirs
and measures the time until a quorum of live members reports the same new leader.
The last line is the summary:
  bench: scenario=S members=N profile=P trials=T p50_ms=A p90_ms=B p99_ms=C max_ms=D detect_ms=E ...

dledger bench calm: faults that must not move leadership (see dledger bench calm -h).
`

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "dledger bench: name a benchmark: dledger bench failover --members 3 --trials 20 --scenario crash")
		return 2
	}
	switch args[0] {
	case "failover":
	case "calm":
		return runBenchCalm(args[1:], stdout, stderr)
	case "compare":
		return runBenchCompare(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "dledger bench: unknown benchmark %q (known: failover, calm, compare)\n", args[0])
		return 2
	}
	opts, code, ok := parseBenchFlags(args[1:], stderr)
	if !ok {
		return code
	}
	ctx, stop := benchContext()
	defer stop()
	return bench.RunFailover(ctx, opts, stdout, stderr)
}

// benchContext ends on Ctrl-C, SIGTERM or SIGHUP. The members run in their own process group,
// so a terminal's Ctrl-C reaches only this process; cancelling ctx makes every wait return and
// the benchmark's cleanup kill them.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

const benchCalmUsage = `usage: dledger bench calm [--scenario all|NAME[,NAME...]] [--members 3] [--duration 60s] [--profile lan|dledger] [flags]

Faults that must not move leadership. Each scenario runs a fresh group of real 'dledger server'
processes on 127.0.0.1, injects its fault again and again for --duration, and counts leader
changes, term increases and term increases by the faulted member (the target is 0 of each):
  flap-follower  SIGSTOP a follower for 0.2 to 3 detection windows, SIGCONT, repeat
  flap-link      cut a follower off from the other members and heal it, repeatedly (each
                 member in its own network namespace; needs root and iproute2, else skipped)
  leader-resets  reset every TCP connection of the live leader with ss -K (needs root and
                 CONFIG_INET_DIAG_DESTROY, else skipped)
  restart-loop   kill a follower (kill -9 and SIGTERM alternately) and restart it, repeatedly
  cpu-starved    a follower limited by a cgroup to --cpu-quota of one CPU per --cpu-period
                 (default 50 ms per second, so it is held for ~950 ms at a time: longer than
                 the lan detection window; v2 cpu.max or v1 cpu.cfs_quota_us, needs root),
                 else stopped 50 ms of every 100 ms by SIGSTOP
One line per scenario, then the summary:
  calm: summary members=N profile=P scenarios=S ran=R skipped=K broken=B faults=F leader_changes=C term_increases=T faulted_term_increases=U violations=V elected=E
(leader_changes: changes of the (leader, term) a quorum reports; elected: "becomes leader" lines in
the members' logs, which also catch a leader that stepped down and won again in its own term.)
Exit status 0 whatever was counted (it reports, it does not judge); 1 a scenario broke off.
`

func runBenchCalm(args []string, stdout, stderr io.Writer) int {
	o := bench.CalmOptions{}
	var scenarios string
	fs := flag.NewFlagSet("bench calm", flag.ContinueOnError)
	fs.StringVar(&scenarios, "scenario", "all", "all, or a comma-separated list of "+strings.Join(bench.CalmScenarios, ", "))
	fs.IntVar(&o.Members, "members", 3, "group size, 3 to 9")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long each scenario injects faults")
	fs.DurationVar(&o.Settle, "settle", 0, "keep counting this long after the last fault (default 2 x detection window)")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan or dledger")
	fs.StringVar(&o.Binary, "binary", "", "the dledger executable to run as members (default: this executable)")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period (1ms-10ms)")
	fs.Float64Var(&o.CPUQuota, "cpu-quota", 0.05, "cpu-starved: the member's share of one CPU (cgroup method)")
	fs.DurationVar(&o.CPUPeriod, "cpu-period", time.Second, "cpu-starved: the period the quota applies to (cgroup method)")
	fs.StringVar(&o.CPUMethod, "cpu-method", bench.CPUMethodAuto, "cpu-starved: auto (cgroup if possible), cgroup or sigstop")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (member logs, data dirs) after the run")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the members' log level")
	fs.StringVar(&o.Group, "group", "bench", "replica group name")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchCalmUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	var err error
	if o.Scenarios, err = bench.ParseCalmScenarios(scenarios); err == nil {
		err = o.Resolve()
	}
	if err != nil {
		fmt.Fprintf(stderr, "dledger bench calm: %v\n", err)
		return 2
	}
	ctx, stop := benchContext()
	defer stop()
	return bench.RunCalm(ctx, o, stdout, stderr)
}

// parseBenchFlags parses and checks the flags; on error it prints one line and returns 2.
func parseBenchFlags(args []string, stderr io.Writer) (bench.Options, int, bool) {
	var o bench.Options
	fs := flag.NewFlagSet("bench failover", flag.ContinueOnError)
	fs.IntVar(&o.Members, "members", 3, "group size, 3 to 9 (3 and 5 are the standard set)")
	fs.IntVar(&o.Trials, "trials", 10, "number of trials")
	fs.StringVar(&o.Scenario, "scenario", bench.ScenarioCrash, "crash (kill -9 the leader), pause (SIGSTOP the leader) or cold-start")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan or dledger")
	fs.StringVar(&o.Binary, "binary", "", "the dledger executable to run as members (default: this executable)")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period while measuring (1ms-10ms)")
	fs.DurationVar(&o.Settle, "settle", 0, "watch this long after convergence for needless leader changes (default 2 x detection window)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "a trial not converged by then fails (default 10 x (detection window + max vote round) + 5s)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (member logs, data dirs) after a successful run")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the members' log level (their logs go to files in the work dir)")
	fs.StringVar(&o.Group, "group", "bench", "replica group name")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return o, code, false
	}
	if err := o.Resolve(); err != nil {
		fmt.Fprintf(stderr, "dledger bench failover: %v\n", err)
		return o, 2, false
	}
	return o, 0, true
}
