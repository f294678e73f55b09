package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dledger-go/dledger/cmd/dledger-lab/internal/compare"
)

// `dledger-lab compare`: the flags are parsed here; the benchmark is package
// cmd/dledger-lab/internal/compare.

const compareUsage = `usage: dledger-lab compare [--trials 20] [--trials-defaults 10] [--binary PATH] [flags]

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
(Formerly dledger bench compare, which now points here.)
`

func runCompare(args []string, stdout, stderr io.Writer) int {
	var o compare.Options
	var sets, systems string
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.IntVar(&o.Trials, "trials", 20, "trials per system in the matched set")
	fs.IntVar(&o.TrialsDefaults, "trials-defaults", 10, "trials per system in the defaults set")
	fs.StringVar(&sets, "sets", "matched,defaults", "comma-separated sets to run, in order: matched, defaults")
	fs.StringVar(&systems, "systems", "ours,etcd,zookeeper", "comma-separated systems: ours, etcd, zookeeper")
	fs.StringVar(&o.Binary, "binary", memberBinary(), "our dledger executable run as members (default: dledger beside this executable, or on PATH)")
	fs.StringVar(&o.Etcd, "etcd", "etcd", "the etcd executable")
	fs.StringVar(&o.Java, "java", "java", "the java executable for ZooKeeper")
	fs.StringVar(&o.ZKClassPath, "zk-classpath", compare.ZKClassPath, "ZooKeeper's class path (server, servlet API for its AdminServer, an slf4j binding)")
	fs.DurationVar(&o.Idle, "idle", 30*time.Second, "idle window for CPU time per member (0: skip)")
	fs.DurationVar(&o.IdleWarmup, "idle-warmup", 10*time.Second, "wait after the groups are steady before the idle window")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period while measuring (1ms-10ms)")
	fs.DurationVar(&o.Gap, "gap", 500*time.Millisecond, "pause before each trial")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (member logs, configs) after a successful run")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), compareUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if noBinary("compare", o.Binary, stderr) {
		return 2
	}
	o.Sets, o.Systems = splitList(sets), splitList(systems)
	if err := o.Resolve(); err != nil {
		fmt.Fprintf(stderr, "dledger-lab compare: %v\n", err)
		return 2
	}
	ctx, stop := labContext()
	defer stop()
	o.Out = stdout
	rep, err := compare.Run(ctx, o)
	return finish("compare", rep.Dir, err, stderr)
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
