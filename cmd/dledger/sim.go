package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/sim"
)

const simUsage = `usage: dledger sim --seeds N [--seed-start S] [--members K|mixed] [--profile lan|dledger|fast|mixed]
                  [--scenario chaos|rejoin|mixed] [--duration D] [--rpc-timeout D] [--workers W]
                  [--trace] [--hashes] [--broken MODE] [--reports R] [--hosts H [--groups G]]
                  [--reconfig]

Runs the deterministic simulator on seeds S .. S+N-1 and checks docs/protocol.md section 9 after every
event. A violation prints the seed, the invariant, the last trace events and a command that
replays it with the full trace. Exit status 0 only when no seed violated an invariant.

  mixed members   3 for even seeds, 5 for odd seeds
  mixed profile   lan when seed/2 is even, dledger when it is odd (never fast)
  mixed scenario  rejoin (L2) when seed/4 is a multiple of 4, chaos otherwise
  --duration 0    100 detection windows of the profile (lan and fast 60s, dledger 10m) of virtual time
  --hosts H       hosts of many groups (docs/protocol.md section 12): H hosts, each a member of
                  G groups (--groups, default 20; member k of group g on host (g+k) mod H), a
                  liveness table per host, host faults (crash, pause, restart, isolation, cut);
                  members at most H (mixed: 3, or 5 for odd seeds with 5 hosts or more), chaos
  --reconfig      membership changes (docs/protocol.md section 13): in chaos seeds, two spare
                  members join, and the leader adds, promotes and removes members during the
                  faults and after each heal; S6 and S7 checked too (rejoin seeds unchanged)
  --broken MODE   switch on a deliberate bug to see the checker catch it; each mode breaks
                  the invariant named (dledger/sim/broken_test.go shows it is caught):
                    double-vote        a member grants two candidates in a term     S2 (S1)
                    skip-ledger-check  votes ignore the ledger comparison           S4
                    forget-on-crash    the vote store loses everything in a crash   S3 or S2
                    accept-has-leader  REJECT_ALREADY_HAS_LEADER counted as ACCEPT  S1
                    event-seen-term    role events carry a term not yet adopted     S5
                    no-revote          a candidate stops asking for votes after a   L1
                                       lost round
                    keep-lost-round    a follower keeps its lost round's result     L2 (rejoin scenario)
                    endless-take       a transferee never leaves the take           L3
                    gone-on-cut        a cut link is reported as the peer's process L2 (rejoin scenario)
                                       gone
                    no-abstain         sidecar members vote before their ledger is  S4
                                       reported after a restart
                    forget-deadline    NextPassAt leaves out the preferred-leader   PASS
                                       check's deadline
                    host-never-stale   a host's liveness table vouches for a host   L4 (--hosts)
                                       once heard, stale or changed
                    gone-as-wake       a host's table wakes the followers whose     GONE (--hosts)
                                       leader's host died but does not tell them
                    rely-once          a host's table keeps the first reliance a    GONE or L4 (--hosts)
                                       member tells it
                    two-voters         a promote also removes a voter: two voters   S7 (S6, S1)
                                       changed at once (implies --reconfig)
                    commit-new-quorum  a configuration commits on a quorum of its   S7 (S6, S1)
                                       own voters, not the old one's (--reconfig)
                    window-below-floor followers wait a quarter of their adapted  CALM (rejoin scenario)
                                       timeout, below its floor

flags:
`

// runSim is the "dledger sim" command.
func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dledger sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported as one line below
	seeds := fs.Int("seeds", 0, "number of seeds to run (required, >= 1)")
	seedStart := fs.Uint64("seed-start", 1, "first seed")
	members := fs.String("members", sim.Mixed, "members per group: 3..7, or mixed (3 and 5)")
	profile := fs.String("profile", sim.Mixed, "timing profile: lan, dledger, fast, or mixed (lan and dledger by seed)")
	scenario := fs.String("scenario", sim.Mixed, "chaos (faults and heals: S1-S5, L1, L3), rejoin (L2), or mixed")
	duration := fs.Duration("duration", 0, "virtual time per seed before the final heal (0: 100 detection windows)")
	rpcTimeout := fs.Duration("rpc-timeout", sim.DefaultRPCTimeout, "simulated rpc call timeout")
	workers := fs.Int("workers", 0, "seeds run in parallel (0: GOMAXPROCS; --trace forces 1)")
	trace := fs.Bool("trace", false, "print the full trace of every seed (meant for --seeds 1)")
	broken := fs.String("broken", "", "deliberate bug for checker self-tests (see above): "+brokenNames())
	reports := fs.Int("reports", 3, "full violation reports to print; later violations get one line")
	hashes := fs.Bool("hashes", false, "print one line per seed: its trace hash, elections and steps (to show a refactoring changes no run)")
	hosts := fs.Int("hosts", 0, "run hosts of many groups: this many hosts (3..7; 0: one group, no hosts)")
	groups := fs.Int("groups", 0, "groups per run of hosts (0: 20)")
	reconfig := fs.Bool("reconfig", false, "change the configuration during chaos seeds (add, promote, remove members; S6, S7)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, simUsage)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "dledger sim: %v (see dledger sim -h)\n", err)
		return 2
	}
	c, err := simCampaign(fs, *seeds, *seedStart, *members, *profile, *scenario, *duration, *rpcTimeout, *workers, *broken, *reports)
	if err != nil {
		fmt.Fprintf(stderr, "dledger sim: %v (see dledger sim -h)\n", err)
		return 2
	}
	c.Reconfig = *reconfig
	if err := simHosts(&c, *hosts, *groups); err != nil {
		fmt.Fprintf(stderr, "dledger sim: %v (see dledger sim -h)\n", err)
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if *trace {
		c.Trace = out
	}
	start, lastProgress := time.Now(), time.Now()
	done, violations := 0, 0
	c.OnResult = func(r sim.Result) {
		done++
		if *hashes {
			fmt.Fprintln(out, hashLine(r))
		}
		if r.Violation != nil {
			violations++
			if violations <= *reports {
				fmt.Fprint(out, r.Report())
			} else {
				fmt.Fprintf(out, "VIOLATION %s seed=%d: %s\n  replay: %s\n", r.Violation.Invariant, r.Seed, r.Violation.Detail, r.Violation.Replay)
			}
		}
		if done%100 == 0 || time.Since(lastProgress) > 5*time.Second {
			lastProgress = time.Now()
			fmt.Fprintf(out, "sim: progress seeds=%d/%d violations=%d wall_seconds=%.1f\n", done, c.Seeds, violations, time.Since(start).Seconds())
			out.Flush()
		}
	}
	sum, err := sim.Campaign(c)
	if err != nil {
		out.Flush()
		fmt.Fprintf(stderr, "dledger sim: %v\n", err)
		return 2
	}
	fmt.Fprintln(out, sum.Line())
	if sum.Violations > 0 {
		return 1
	}
	return 0
}

// hashLine is a seed's line under --hashes: two campaigns ran the same code paths on every
// seed when their lines are identical (seeds come in order whatever the worker count).
func hashLine(r sim.Result) string {
	return fmt.Sprintf("seed=%d hash=%016x elections=%d steps=%d", r.Seed, r.TraceHash, r.Elections, r.Steps)
}

// simCampaign turns the flags into campaign options, with one clear error for a bad value.
func simCampaign(fs *flag.FlagSet, seeds int, seedStart uint64, members, profile, scenario string,
	duration, rpcTimeout time.Duration, workers int, broken string, reports int) (sim.CampaignOptions, error) {
	c := sim.CampaignOptions{Seeds: seeds, SeedStart: seedStart, Profile: profile, Scenario: scenario,
		Duration: duration, RPCTimeout: rpcTimeout, Workers: workers, Broken: sim.Broken(broken)}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if seeds < 1 {
		return c, fmt.Errorf("--seeds must be >= 1 (got %d)", seeds)
	}
	k, err := simMembers(members)
	if err != nil {
		return c, err
	}
	c.Members = k
	if err := oneOf("profile", profile, simProfiles); err != nil {
		return c, err
	}
	if err := oneOf("scenario", scenario, simScenarios); err != nil {
		return c, err
	}
	if err := simLimits(duration, rpcTimeout, workers, reports); err != nil {
		return c, err
	}
	if err := checkBroken(broken); err != nil {
		return c, err
	}
	return c, nil
}

// simMembers is --members as a group size, 0 for mixed.
func simMembers(members string) (int, error) {
	if members == sim.Mixed {
		return 0, nil
	}
	k, err := strconv.Atoi(members)
	if err != nil || k < sim.MinMembers || k > sim.MaxMembers {
		return 0, fmt.Errorf("--members must be %d..%d or mixed (got %q)", sim.MinMembers, sim.MaxMembers, members)
	}
	return k, nil
}

// simProfiles and simScenarios are the values --profile and --scenario take, in the order
// an error names them.
var (
	simProfiles  = append(dledger.Profiles(), sim.Mixed)
	simScenarios = []string{string(sim.ScenarioChaos), string(sim.ScenarioRejoin), sim.Mixed}
)

// oneOf refuses a value of --name that is not one of names.
func oneOf(name, value string, names []string) error {
	if slices.Contains(names, value) {
		return nil
	}
	last := len(names) - 1
	return fmt.Errorf("--%s must be %s or %s (got %q)", name, strings.Join(names[:last], ", "), names[last], value)
}

// simLimits checks the flags that are numbers or durations.
func simLimits(duration, rpcTimeout time.Duration, workers, reports int) error {
	switch {
	case duration < 0:
		return fmt.Errorf("--duration must not be negative (got %v)", duration)
	case rpcTimeout <= 0:
		return fmt.Errorf("--rpc-timeout must be > 0 (got %v)", rpcTimeout)
	case workers < 0:
		return fmt.Errorf("--workers must be >= 0 (got %d)", workers)
	case reports < 0:
		return fmt.Errorf("--reports must be >= 0 (got %d)", reports)
	}
	return nil
}

// simHosts sets --hosts and --groups on the campaign.
func simHosts(c *sim.CampaignOptions, hosts, groups int) error {
	switch {
	case hosts == 0 && groups != 0:
		return fmt.Errorf("--groups needs --hosts")
	case hosts != 0 && (hosts < sim.MinHosts || hosts > sim.MaxHosts):
		return fmt.Errorf("--hosts must be %d..%d (got %d)", sim.MinHosts, sim.MaxHosts, hosts)
	case groups < 0:
		return fmt.Errorf("--groups must be >= 1 (got %d)", groups)
	}
	c.Hosts, c.Groups = hosts, groups
	return nil
}

// checkBroken refuses a --broken that names no mode ("" is none).
func checkBroken(broken string) error {
	if broken == "" || slices.Contains(sim.BrokenModes(), sim.Broken(broken)) {
		return nil
	}
	return fmt.Errorf("--broken must be one of %s (got %q)", brokenNames(), broken)
}

// brokenNames lists the --broken modes, comma separated.
func brokenNames() string {
	var names []string
	for _, b := range sim.BrokenModes() {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ")
}
