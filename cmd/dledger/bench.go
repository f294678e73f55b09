package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/dledger"
)

// `dledger bench failover`: the flags are parsed here; the benchmark itself is package
// cmd/internal/harness. The lab's benchmarks (calm, compare) are in the second command,
// dledger-lab: the product binary runs no ip netns, ss -K, cgroup writes or other systems.

const benchUsage = `usage: dledger bench failover --members 3|5 --trials N --scenario crash|pause|cold-start [--profile lan|dledger|fast] [flags]

Runs the group as real 'dledger server' processes on 127.0.0.1 and, per trial:
  crash       kill -9 the leader, then restart it and wait until the group is stable again
  pause       SIGSTOP the leader (its sockets stay open), then SIGCONT it after the trial
  cold-start  start every member at once on fresh data dirs
and measures the time until a quorum of live members reports the same new leader.
The last line is the summary:
  bench: scenario=S members=N profile=P trials=T p50_ms=A p90_ms=B p99_ms=C max_ms=D detect_ms=E ...

Many groups per host (three host processes, each a member of every group): dledger bench groups -h.
Replacing a member while the group runs (--join, add, promote, remove): dledger bench replace -h.

Faults that must not move leadership, and the comparison with etcd and ZooKeeper, are in the
lab command: dledger-lab calm, dledger-lab compare (go build ./cmd/dledger-lab).
`

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "dledger bench: name a benchmark: dledger bench failover --members 3 --trials 20 --scenario crash")
		return 2
	}
	switch args[0] {
	case "failover":
	case "groups":
		return runBenchGroups(args[1:], stdout, stderr)
	case "replace":
		return runBenchReplace(args[1:], stdout, stderr)
	case "calm", "compare":
		// Moved out of the product binary; the old spelling points to the new one.
		fmt.Fprintf(stderr, "dledger bench %s: moved to the lab command: dledger-lab %s (go build ./cmd/dledger-lab)\n", args[0], args[0])
		return 2
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "dledger bench: unknown benchmark %q (known: failover, groups, replace)\n", args[0])
		return 2
	}
	opts, code, ok := parseBenchFlags(args[1:], stderr)
	if !ok {
		return code
	}
	ctx, stop := benchContext()
	defer stop()
	opts.Out = stdout
	rep, err := harness.RunFailover(ctx, opts)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "dledger bench failover: %v\n", err)
	case rep.Dir != "":
		fmt.Fprintf(stderr, "dledger bench failover: logs kept in %s\n", rep.Dir)
	}
	return harness.ExitCode(err)
}

// benchContext ends on Ctrl-C, SIGTERM or SIGHUP. The members run in their own process group,
// so a terminal's Ctrl-C reaches only this process; cancelling ctx makes every wait return and
// the benchmark's cleanup kill them.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

// parseBenchFlags parses and checks the flags; on error it prints one line and returns 2.
func parseBenchFlags(args []string, stderr io.Writer) (harness.Options, int, bool) {
	var o harness.Options
	fs := flag.NewFlagSet("bench failover", flag.ContinueOnError)
	fs.IntVar(&o.Members, "members", 3, "group size, 3 to 9 (3 and 5 are the standard set)")
	fs.IntVar(&o.Trials, "trials", 10, "number of trials")
	fs.StringVar(&o.Scenario, "scenario", harness.ScenarioCrash, "crash (kill -9 the leader), pause (SIGSTOP the leader) or cold-start")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan, dledger or fast")
	fs.StringVar(&o.Binary, "binary", "", "the dledger executable to run as members (default: this executable)")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period while measuring (1ms-10ms)")
	fs.DurationVar(&o.Settle, "settle", 0, "watch this long after convergence for needless leader changes (default 2 x detection window)")
	fs.DurationVar(&o.Warm, "warm", 0, "let the group run stable this long before each fault, so every link's adaptive window has adapted (default 0)")
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
