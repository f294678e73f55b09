package sim

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// Scenario names what a run does to the group.
type Scenario string

const (
	// ScenarioChaos alternates fault phases and heal phases (S1-S5 always, L1 at every heal,
	// L3 at every leadership transfer).
	ScenarioChaos Scenario = "chaos"
	// ScenarioRejoin elects a stable leader, cuts one follower off completely, lets it rejoin
	// and checks that the leader never changes (L2). No other faults.
	ScenarioRejoin Scenario = "rejoin"
)

// Broken names a deliberate bug, so the checker itself can be shown to fail (docs/protocol.md
// section 9). Never used outside checker tests and the CLI's --broken flag. Each
// comment names the invariant the bug must break (broken_test.go shows it is caught); how each
// is injected, from outside the elector's decision tables, is in broken.go.
type Broken string

const (
	BrokenNone            Broken = ""
	BrokenDoubleVote      Broken = "double-vote"       // a voter grants a second candidate in a term: S2 (then S1)
	BrokenSkipLedgerCheck Broken = "skip-ledger-check" // a voter never compares ledgers: S4
	BrokenForgetOnCrash   Broken = "forget-on-crash"   // the vote store loses everything in a crash: S3 or S2
	BrokenAcceptHasLeader Broken = "accept-has-leader" // REJECT_ALREADY_HAS_LEADER tallied as ACCEPT: S1
	BrokenEventSeenTerm   Broken = "event-seen-term"   // candidate events carry a term not yet adopted: S5
	BrokenNoRevote        Broken = "no-revote"         // a candidate never asks for votes again after a loss: L1
	BrokenKeepLostRound   Broken = "keep-lost-round"   // a follower keeps its lost round's result: L2 (rejoin scenario)
	BrokenEndlessTake     Broken = "endless-take"      // a transferee never leaves the take: L3
	BrokenGoneOnCut       Broken = "gone-on-cut"       // a cut link is reported as the peer's process gone: L2 (rejoin scenario)
	// BrokenForgetDeadline: the preferred-leader check's deadline is left out of NextPassAt, so
	// the check waits for whatever pass comes next: PASS (the oracle of passes.go).
	BrokenForgetDeadline Broken = "forget-deadline"
	// BrokenNoAbstain: sidecar members run without Options.LedgerFromStorage, so a restarted
	// one votes on the empty ledger its elector starts with until the report (issue 12): S4,
	// checked against the true ledger.
	BrokenNoAbstain Broken = "no-abstain"
	// BrokenHostNeverStale: on hosts of many groups (Options.Hosts), the liveness table keeps
	// vouching for a peer host's members once heard, as if the host never went stale and its
	// members never changed, so a paused or crashed host's leaders stay trusted: L4.
	BrokenHostNeverStale Broken = "host-never-stale"
	// BrokenGoneAsWake: on hosts of many groups, the host registers its members with its
	// liveness table as a wake only (Table.AddMember), so the table's news of a dead host
	// (FailedLink's tells) wakes the followers whose leader was there but does not tell them
	// it is gone, and the host's later news skips them as told: GONE.
	BrokenGoneAsWake Broken = "gone-as-wake"
	// BrokenRelyOnce: on hosts of many groups, a member's liveness table keeps the first
	// reliance the member told it (Member.Rely), so the table's index of the followers that
	// depend on a peer host, and its wakes, follow the leader a follower named first: GONE
	// after a crash, L4 after a pause or an isolation (nobody woken).
	BrokenRelyOnce Broken = "rely-once"
	// BrokenTwoVoters: a promote also removes another voter, two voters changed at once
	// (issue 31): S7, or S6 / S1. It implies Options.Reconfig.
	BrokenTwoVoters Broken = "two-voters"
	// BrokenCommitNewQuorum: a proposed configuration commits on a quorum of its own voters
	// alone, not of the committed configuration's (issue 31): S7, or S6 / S1. It implies
	// Options.Reconfig.
	BrokenCommitNewQuorum Broken = "commit-new-quorum"
	// BrokenWindowBelowFloor: the follower pass uses a quarter of the follower timeout the
	// detector gives it (docs/protocol.md 14), below the floor the measured jitter justifies:
	// followers of a healthy leader time out between its heartbeats (CALM, rejoin scenario).
	BrokenWindowBelowFloor Broken = "window-below-floor"
)

// BrokenModes lists the deliberate bugs the simulator can switch on.
func BrokenModes() []Broken {
	return []Broken{BrokenDoubleVote, BrokenSkipLedgerCheck, BrokenForgetOnCrash, BrokenAcceptHasLeader,
		BrokenEventSeenTerm, BrokenNoRevote, BrokenKeepLostRound, BrokenEndlessTake, BrokenNoAbstain, BrokenGoneOnCut,
		BrokenForgetDeadline, BrokenHostNeverStale, BrokenGoneAsWake, BrokenRelyOnce, BrokenTwoVoters, BrokenCommitNewQuorum, BrokenWindowBelowFloor}
}

// DefaultRPCTimeout matches the rpc client's default CallTimeout: a lost message ends in
// done(nil, err) this long after Send.
const DefaultRPCTimeout = time.Second

// MinMembers and MaxMembers bound the group size.
const (
	MinMembers = 3
	MaxMembers = 7
)

// Options describe one run. The zero value of every field but Seed has a default.
type Options struct {
	Seed     uint64
	Members  int      // 3..7; 0 means 3
	Profile  string   // dledger.Profile name; "" means "lan"
	Scenario Scenario // "" means chaos
	// Duration is the virtual time after which no new fault phase starts; the run then ends
	// with a checked heal phase. 0 means DefaultDuration(profile).
	Duration   time.Duration
	RPCTimeout time.Duration // 0 means DefaultRPCTimeout
	Broken     Broken
	// Trace, when set, receives every trace line as it happens (the full trace).
	Trace io.Writer
	// Hosts > 0 runs hosts of many groups (hosts.go): Hosts hosts (MinHosts..MaxHosts), each
	// carrying members of Groups groups (0 means 20) of Members members (at most Hosts), with
	// a liveness table per host unless NoTable, under host faults. Scenario must be chaos.
	Hosts   int
	Groups  int
	NoTable bool
	// Reconfig: the chaos scenario changes the configuration during its faults and heals,
	// with spare members that join (reconfig.go, docs/protocol.md 13.8). Not with Hosts.
	Reconfig bool
}

// MinHosts and MaxHosts bound Options.Hosts.
const (
	MinHosts = 3
	MaxHosts = 7
)

// DefaultDuration is 100 detection windows (leak x heartbeat interval) of virtual time: 60 s
// for "lan", 600 s for "dledger". A fault phase lasts 1-4 windows and a heal phase usually
// ends within 1-3 windows, so a seed goes through about 15 fault/heal cycles, and 1000 mixed
// seeds still take well under a minute on two cores.
func DefaultDuration(cfg dledger.Config) time.Duration { return 100 * cfg.DetectionWindow() }

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, dledger.Config, error) {
	if o.Members == 0 {
		o.Members = MinMembers
	}
	if o.Members < MinMembers || o.Members > MaxMembers {
		return o, dledger.Config{}, fmt.Errorf("members must be %d..%d (got %d)", MinMembers, MaxMembers, o.Members)
	}
	if o.Profile == "" {
		o.Profile = dledger.ProfileLAN
	}
	cfg, err := dledger.Profile(o.Profile)
	if err != nil {
		return o, cfg, err
	}
	err = o.scenarioDefaults()
	if err == nil {
		err = o.timeDefaults(cfg)
	}
	if err == nil {
		err = o.hostDefaults()
	}
	if err == nil {
		err = o.brokenNeeds()
	}
	return o, cfg, err
}

// scenarioDefaults checks the scenario (chaos when none) and the broken mode.
func (o *Options) scenarioDefaults() error {
	if o.Scenario == "" {
		o.Scenario = ScenarioChaos
	}
	if o.Scenario != ScenarioChaos && o.Scenario != ScenarioRejoin {
		return fmt.Errorf("unknown scenario %q (known: chaos, rejoin)", o.Scenario)
	}
	return o.Broken.validate()
}

// timeDefaults checks the run's duration and rpc timeout, and fills in their defaults for cfg.
func (o *Options) timeDefaults(cfg dledger.Config) error {
	if o.Duration < 0 || o.RPCTimeout < 0 {
		return fmt.Errorf("duration and rpc timeout must not be negative")
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration(cfg)
	}
	if o.RPCTimeout == 0 {
		o.RPCTimeout = DefaultRPCTimeout
	}
	return nil
}

// hostDefaults checks a run of hosts of many groups (Hosts or Groups set; 20 groups when
// Groups is not).
func (o *Options) hostDefaults() error {
	if o.Hosts == 0 && o.Groups == 0 {
		return nil
	}
	if o.Groups == 0 {
		o.Groups = 20
	}
	switch {
	case o.Hosts < MinHosts || o.Hosts > MaxHosts:
		return fmt.Errorf("hosts must be %d..%d (got %d)", MinHosts, MaxHosts, o.Hosts)
	case o.Groups < 1 || o.Groups > 10_000:
		return fmt.Errorf("groups must be 1..10000 (got %d)", o.Groups)
	case o.Members > o.Hosts:
		return fmt.Errorf("members (%d) must not exceed hosts (%d): a host carries one member of a group", o.Members, o.Hosts)
	case o.Scenario != ScenarioChaos:
		return fmt.Errorf("hosts run the chaos scenario only (got %s)", o.Scenario)
	}
	return nil
}

// brokenNeeds turns on what a broken mode needs (reconfigurations for the two that break
// them) and refuses the runs that cannot have it.
func (o *Options) brokenNeeds() error {
	if o.Broken == BrokenTwoVoters || o.Broken == BrokenCommitNewQuorum {
		o.Reconfig = true
	}
	if o.Reconfig && o.Hosts > 0 {
		return fmt.Errorf("reconfigurations run with one group, not hosts")
	}
	if (o.Broken == BrokenHostNeverStale || o.Broken == BrokenGoneAsWake || o.Broken == BrokenRelyOnce) && o.Hosts == 0 {
		return fmt.Errorf("broken mode %s needs hosts", o.Broken)
	}
	return nil
}

// validate accepts no bug and the modes of BrokenModes.
func (b Broken) validate() error {
	if b == BrokenNone {
		return nil
	}
	var names []string
	for _, k := range BrokenModes() {
		if k == b {
			return nil
		}
		names = append(names, string(k))
	}
	return fmt.Errorf("unknown broken mode %q (known: %s)", b, strings.Join(names, ", "))
}

// Result is the outcome of one run.
type Result struct {
	Seed     uint64
	Members  int
	Profile  string
	Scenario Scenario
	// Violation is nil when every invariant held.
	Violation *Violation
	Elections int   // leaders elected (one per term that had a leader)
	MaxTerm   int64 // highest currTerm any member reached
	// TermsUsed is MaxTerm minus the lowest term a member started at (0 but in extreme runs).
	TermsUsed int64
	// Extreme says how high the run's terms and ledgers started; CeilingReached that a member
	// reached protocol.MaxTerm (L1 is not checked after that, see ExtremeAtCeiling).
	Extreme        Extreme
	CeilingReached bool
	// Sidecar: the members were sidecars, a restarted one reporting its ledger after a delay.
	Sidecar bool
	// Staggered: the members started at different times (startDelays).
	Staggered bool
	SimTime   time.Duration // virtual time simulated
	Steps     int           // events processed
	Heals     int           // heal phases that ended with a stable leader
	// MaxRecovery is the longest time from the start of a heal phase to a stable leader,
	// against Bound (L1Bound of the run's config).
	MaxRecovery time.Duration
	Bound       time.Duration
	TraceHash   uint64 // FNV-1a over every trace record: equal for equal seeds
	Preferred   string // the preferred leader of this run ("" for none)
	FinalLeader string // the leader when the run ended ("" for none)
	PreferredUp bool   // the preferred member was running when the run ended
	// Hosts and Groups: a run of hosts (Options.Hosts), else 0; Transfers: the leadership
	// transfers an admin asked for in it.
	Hosts, Groups, Transfers int
	// ReplayOptions reproduce this run (with Trace unset).
	ReplayOptions Options
}

// Violation is a broken invariant: which one, what was seen, and how to see it again.
type Violation struct {
	Invariant string        // "S1".."S5", "L1".."L4", "PASS" (passes.go), or "SIM" for a simulator self-check
	Detail    string        // what was seen
	At        time.Duration // virtual time
	Tail      []string      // the last trace lines before the violation, oldest first
	Replay    string        // a command that replays the run with the full trace
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s violated at %v: %s", v.Invariant, v.At, v.Detail)
}

// Report is the multi-line text printed for a violation: the seed, the invariant, the tail of
// the trace and the replay command.
func (r Result) Report() string {
	v := r.Violation
	if v == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION %s seed=%d members=%d profile=%s scenario=%s at=%v\n  %s\n",
		v.Invariant, r.Seed, r.Members, r.Profile, r.Scenario, v.At, v.Detail)
	fmt.Fprintf(&b, "  last %d trace events:\n", len(v.Tail))
	for _, l := range v.Tail {
		b.WriteString("    " + l + "\n")
	}
	fmt.Fprintf(&b, "  replay: %s\n", v.Replay)
	return b.String()
}

// ReplayCommand is the one-line command that replays the run o with the full trace.
func ReplayCommand(o Options) string {
	// Every choice the CLI would otherwise make per seed (members, profile, scenario: "mixed" by
	// default) is spelled out, so the line replays this run and no other.
	scenario := o.Scenario
	if scenario == "" {
		scenario = ScenarioChaos
	}
	cmd := fmt.Sprintf("go run ./cmd/dledger sim --seeds 1 --seed-start %d --members %d --profile %s --scenario %s",
		o.Seed, o.Members, o.Profile, scenario)
	if cfg, err := dledger.Profile(o.Profile); err == nil && o.Duration != 0 && o.Duration != DefaultDuration(cfg) {
		cmd += " --duration " + o.Duration.String()
	}
	if o.RPCTimeout != 0 && o.RPCTimeout != DefaultRPCTimeout {
		cmd += " --rpc-timeout " + o.RPCTimeout.String()
	}
	if o.Hosts > 0 {
		cmd += fmt.Sprintf(" --hosts %d --groups %d", o.Hosts, o.Groups)
	}
	if o.Broken != BrokenNone {
		cmd += " --broken " + string(o.Broken)
	}
	if o.Reconfig {
		cmd += " --reconfig"
	}
	return cmd + " --trace"
}
