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

	"github.com/dledger-go/dledger/cmd/dledger/internal/compare"
)

// `dledger bench compare`: the flags are parsed here; the benchmark is package
// cmd/dledger/internal/compare.

const benchCompareUsage = `usage: dledger bench compare [--trials 20] [--trials-defaults 10] [--binary PATH] [flags]

Runs our failover side by side with etcd and ZooKeeper (from Debian's etcd-server and
zookeeper packages), 3 members each on 127.0.0.1, in two sets:
  matched   the same ~600 ms tolerance to a silent leader: ours --profile lan,
            etcd --heartbeat-interval 100 --election-timeout 600,
            ZooKeeper tickTime=200 initLimit=10 syncLimit=3
  defaults  each as shipped: ours with its default profile (lan) and --profile dledger,
            etcd 100/1000 ms, ZooKeeper tickTime=2000 initLimit=10 syncLimit=5
Per set: idle CPU and RSS of every member, then trials interleaved across the systems: kill -9
of the leader at a random point of its heartbeat cycle, measured until a quorum (2 of 3)
names the same new leader. Prints a markdown table (p50/p90/p99 and ratios to ours) and one
line per row:
  compare: set=S system=X trials=T failed=F p50_ms=A p90_ms=B p99_ms=C ... ratio_p50=R ...
A system that is not installed is skipped with the reason (exit status 1).
`

func runBenchCompare(args []string, stdout, stderr io.Writer) int {
	var o compare.Options
	var sets, systems string
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	fs.IntVar(&o.Trials, "trials", 20, "trials per system in the matched set")
	fs.IntVar(&o.TrialsDefaults, "trials-defaults", 10, "trials per system in the defaults set")
	fs.StringVar(&sets, "sets", "matched,defaults", "comma-separated sets to run, in order: matched, defaults")
	fs.StringVar(&systems, "systems", "ours,etcd,zookeeper", "comma-separated systems: ours, etcd, zookeeper")
	fs.StringVar(&o.Binary, "binary", "", "our dledger executable run as members (default: this executable)")
	fs.StringVar(&o.Etcd, "etcd", "etcd", "the etcd executable")
	fs.StringVar(&o.Java, "java", "java", "the java executable for ZooKeeper")
	fs.StringVar(&o.ZKClassPath, "zk-classpath", compare.ZKClassPath, "ZooKeeper's class path (server, servlet API for its AdminServer, an slf4j binding)")
	fs.DurationVar(&o.Idle, "idle", 30*time.Second, "idle window for CPU time per member (0: skip)")
	fs.DurationVar(&o.IdleWarmup, "idle-warmup", 10*time.Second, "wait after the groups are steady before the idle window")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period while measuring (1ms-10ms)")
	fs.DurationVar(&o.Gap, "gap", 500*time.Millisecond, "pause before each trial")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (member logs, configs) after a successful run")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchCompareUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	o.Sets, o.Systems = splitList(sets), splitList(systems)
	if err := o.Resolve(); err != nil {
		fmt.Fprintf(stderr, "dledger bench compare: %v\n", err)
		return 2
	}
	// The members run in their own process groups, so a terminal's Ctrl-C reaches only this
	// process; cancelling ctx makes the benchmark kill them all.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return compare.Run(ctx, o, stdout, stderr)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
