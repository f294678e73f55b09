package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dledger-go/dledger/cmd/dledger-lab/internal/calm"
	"github.com/dledger-go/dledger/dledger"
)

// `dledger-lab calm`: the flags are parsed here; the benchmark is package
// cmd/dledger-lab/internal/calm.

const calmUsage = `usage: dledger-lab calm [--scenario all|NAME[,NAME...]] [--members 3] [--duration 60s] [--profile lan|dledger|fast] [flags]

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
  noisy-leader   the leader's round trip to every member jumps from loopback to 100 ms and
                 back every 10 s (a noisy neighbour; user-space delay proxies)
  slow-follower  the link between the leader and one follower turns slow, 50 +- 10 ms one
                 way, and stays so
  leader-stw     SIGSTOP the leader for 50 ms every second (a stop-the-world pause)
  slow-links     every link --delay +- --jitter one way (default 200 +- 50 ms) from the
                 start; leaderless_ms / duration_s is the leaderless share
  leader-stall   (by name only, not in all) SIGSTOP the leader for twice the follower timeout
                 its followers report, then SIGCONT: one leader change per stall, never two
One line per scenario, then the summary:
  calm: summary members=N profile=P scenarios=S ran=R skipped=K broken=B faults=F leader_changes=C term_increases=T faulted_term_increases=U violations=V elected=E
(leader_changes: changes of the (leader, term) a quorum reports; elected: "becomes leader" lines in
the members' logs, which also catch a leader that stepped down and won again in its own term.)
Exit status 0 whatever was counted (it reports, it does not judge); 1 a scenario broke off.
(Formerly dledger bench calm, which now points here.)
`

func runCalm(args []string, stdout, stderr io.Writer) int {
	o := calm.Options{}
	var scenarios string
	fs := flag.NewFlagSet("calm", flag.ContinueOnError)
	fs.StringVar(&scenarios, "scenario", "all", "all, or a comma-separated list of "+strings.Join(calm.CalmScenarios, ", "))
	fs.IntVar(&o.Members, "members", 3, "group size, 3 to 9")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long each scenario injects faults")
	fs.DurationVar(&o.Settle, "settle", 0, "keep counting this long after the last fault (default 2 x detection window)")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan, dledger or fast")
	fs.StringVar(&o.Binary, "binary", memberBinary(), "the dledger executable to run as members (default: dledger beside this executable, or on PATH)")
	fs.DurationVar(&o.Poll, "poll", 2*time.Millisecond, "status polling period (1ms-10ms)")
	fs.Float64Var(&o.CPUQuota, "cpu-quota", 0.05, "cpu-starved: the member's share of one CPU (cgroup method)")
	fs.DurationVar(&o.CPUPeriod, "cpu-period", time.Second, "cpu-starved: the period the quota applies to (cgroup method)")
	fs.StringVar(&o.CPUMethod, "cpu-method", calm.CPUMethodAuto, "cpu-starved: auto (cgroup if possible), cgroup or sigstop")
	fs.DurationVar(&o.Delay, "delay", 200*time.Millisecond, "slow-links: one-way delay on every link")
	fs.DurationVar(&o.Jitter, "jitter", 50*time.Millisecond, "slow-links: the delay varies by +- this much")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (member logs, data dirs) after the run")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the members' log level")
	fs.StringVar(&o.Group, "group", "bench", "replica group name")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), calmUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if noBinary("calm", o.Binary, stderr) {
		return 2
	}
	var err error
	if o.Scenarios, err = calm.ParseCalmScenarios(scenarios); err == nil {
		err = o.Resolve()
	}
	if err != nil {
		fmt.Fprintf(stderr, "dledger-lab calm: %v\n", err)
		return 2
	}
	ctx, stop := labContext()
	defer stop()
	o.Out = stdout
	rep, err := calm.Run(ctx, o)
	return finish("calm", rep.Dir, err, stderr)
}
