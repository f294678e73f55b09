package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/dledger"
)

// `dledger bench groups`: the flags are parsed here; the benchmark is harness.RunGroups.

const benchGroupsUsage = `usage: dledger bench groups --groups N [--runs R] [--idle 10s] [--settle 5s] [--json] [flags]

Runs three host processes on 127.0.0.1, each a member of every one of N groups (group g's
members n0, n1, n2 on hosts 0, 1, 2), each started as 'dledger server --config FILE' with
DLedger's proxy list (configs:). Per run, on fresh data dirs:
  cold start  all three hosts at once; per group, start -> its first leader
  idle        every group stable and no role event logged for --settle, then --idle of
              nothing: CPU (/proc/<pid>/stat), RSS, fds
  crash       kill -9 of the host leading the most groups; per group it led, kill -> a new leader
  rejoin      that host restarts; the leader balance --rejoin later, and how long after the
              restart every host first led within 5 % of N/3 (rejoin_balanced_ms) and the
              restarted host first led a group (rejoin_first_led_ms)
Latencies are the hosts' own log events ("becomes leader", with group and term); the state
checks are the hosts' admin API (GET /v1/groups). One summary line per run:
  bench-groups: groups=N hosts=3 profile=P idle_cpu_pct=A rss_mib_per_host=B cold_p99_ms=C
    crash_p50_ms=D crash_p99_ms=E other_term_changes=F balance_max_dev_pct=G
    balance_rejoin_max_dev_pct=H ...
(one JSON object per run instead with --json). With --one-failover K, each run is instead one
group's crash failover on hosts of N groups: g0 prefers n0 and every other group n1 or n2, so
host0 leads g0 alone; K times, kill -9 of host0, g0's failover measured (kill -> its new
leader), host0 restarted and g0 back at it:
  bench-groups-one: groups=N trials=K one_crash_p50_ms=A one_crash_p99_ms=B one_crash_max_ms=C
    other_term_changes=D cold_p99_ms=E one_exit_p50_ms=F one_after_exit_p50_ms=G one_after_exit_max_ms=H
(F: kill -> host0 reaped, the kernel's teardown before its sockets close; G, H: the failover less F)
Exits 1 if a run fails, e.g. a group without a leader within --timeout.
`

func runBenchGroups(args []string, stdout, stderr io.Writer) int {
	o := harness.GroupsOptions{}
	fs := flag.NewFlagSet("bench groups", flag.ContinueOnError)
	fs.IntVar(&o.Groups, "groups", 100, "groups; every host is a member of each")
	fs.IntVar(&o.Runs, "runs", 1, "runs, each on fresh hosts and data dirs")
	fs.DurationVar(&o.Idle, "idle", 10*time.Second, "the idle window over which CPU is measured")
	fs.DurationVar(&o.Settle, "settle", 5*time.Second, "the idle window starts once no host logged a role event for this long (the balancer's transfers are not idle)")
	fs.DurationVar(&o.Rejoin, "rejoin", 10*time.Second, "how long after the killed host's restart the balance is taken")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan, dledger or fast (a host's liveness keeps lan's 200 ms interval whatever the profile)")
	fs.StringVar(&o.Binary, "binary", "", "the dledger executable to run as hosts (default: this executable)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "bound of each wait (every group led, stable, failed over); default 10 x (detection window + max vote round) + 5s + 50ms per group")
	fs.BoolVar(&o.JSON, "json", false, "print each run's summary as a JSON object instead of a key=value line")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (host logs, configs, data dirs) after a successful run")
	fs.IntVar(&o.OneFailover, "one-failover", 0, "instead: every group prefers a leader, host0 leads g0 alone; this many kill -9 of host0, each measuring g0's failover (one group's failover on a host of N; a bench-groups-one: line)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the hosts' log level: info or debug (the latencies are info events)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchGroupsUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.Resolve(); err != nil {
		fmt.Fprintf(stderr, "dledger bench groups: %v\n", err)
		return 2
	}
	ctx, stop := benchContext()
	defer stop()
	o.Out = stdout
	_, err := harness.RunGroups(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "dledger bench groups: %v\n", err)
	}
	return harness.ExitCode(err)
}
