package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
)

// group is the replica group every simulated member belongs to.
const group = "sim"

// maxSteps stops a run that would never end (a simulator bug, reported as "SIM").
const maxSteps = 50_000_000

// epoch is virtual time zero. Any fixed instant works; a non-zero one keeps the elector's
// "zero time means never" fields meaningful.
var epoch = time.Unix(1_700_000_000, 0)

// sim is one run: the members, the queue, the network, the checker and the scenario state.
// Only Run's goroutine touches it.
type sim struct {
	opt       Options
	cfg       dledger.Config
	preferred string // the preferred leader, in half the chaos runs
	// leaderOnly: in half the rejoin runs the follower is cut off from the leader only (it
	// still reaches the others), the asymmetric case; else from every member.
	leaderOnly bool
	det        detState // detect.go: the run's calm network, pauses, WIN and CALM
	peers      []memberstate.Peer
	quorum     int
	now        time.Duration
	seq        uint64
	q          queue
	members    []*member
	net        network
	// Separate streams, so that (say) one more message does not reshuffle the fault schedule.
	// rngDisk drives the torn-write fault (maybeTear).
	rngFault, rngNet, rngLedger, rngDisk *rand.Rand
	rngSidecar                           *rand.Rand // sidecar report delays (start.go)
	rngConnect                           *rand.Rand // new connections' delays (announceReachable)
	rngReconf                            *rand.Rand // reconfigurations (reconfig.go)
	tear                                 float64    // this phase's probability that a Save tears
	// How the run starts (start.go): terms and ledgers near the ceilings, sidecar members.
	extreme   Extreme
	sidecar   bool
	staggered bool  // the members start at different times (startDelays)
	startTerm int64 // the lowest persisted term at the start
	tr        *tracer
	chk       checker
	live      liveness
	violation *Violation
	steps     int
	finished  bool
	phaseID   int   // bumped at every phase change; stale phase events do nothing
	preCycles int   // rejoin scenario: chaos cycles left before the L2 watch
	touched   uint8 // members whose elector ran in this event (bit = index)
	probing   bool  // the PASS oracle's early pass is running (passes.go)
	// harness is set when a Cluster drives the run (cluster.go), nil in Run.
	harness *harness
	// Hosts of many groups (hosts.go): the run of hosts this group is part of (nil in Run and
	// a Cluster), this group's index there and its name.
	hr   *hostRun
	gi   int
	name string
	// passes counts the passes the members ran (IdleCost).
	passes int
}

// groupName is the group's name: "sim", or gN in a run of hosts.
func (s *sim) groupName() string {
	if s.name == "" {
		return group
	}
	return s.name
}

// Run simulates one seed. The error is for invalid options only; a broken invariant is
// reported in Result.Violation.
func Run(o Options) (Result, error) {
	o, cfg, err := o.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if o.Hosts > 0 {
		return runHosts(o, cfg), nil
	}
	s := newSim(o, cfg)
	if err := s.run(); err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

func newSim(o Options, cfg dledger.Config) *sim {
	s := newGroup(o, cfg)
	stream, ids := s.stream, s.tr.ids
	if o.Trace != nil { // a header per seed, so a multi-seed trace can be split and searched
		fmt.Fprintf(o.Trace, "=== seed %d members=%d profile=%s scenario=%s\n", o.Seed, o.Members, o.Profile, o.Scenario)
	}
	s.leaderOnly = o.Scenario == ScenarioRejoin && stream(6).IntN(2) == 0
	// Half the chaos runs pin a preferred leader (docs/protocol.md 7.9), so its hand-overs meet every fault.
	// A stream of its own leaves the rest of the seed's schedule as it was. Not in the rejoin
	// scenario, whose L2 check counts every leader change.
	if r := stream(5); o.Scenario == ScenarioChaos && r.IntN(2) == 0 {
		s.preferred = ids[r.IntN(o.Members)]
		s.cfg.PreferredLeaderIDs = []string{s.preferred}
		s.tr.add(record{at: 0, kind: rPhase, a: -1, b: -1, note: "preferred leader " + s.preferred})
	}
	s.chooseStart(7, 8)
	s.chooseLink(stream(11))
	return s
}

// newGroup is what a Run and a Cluster share: the random streams, the members (down, with
// empty ledgers), the tracer, a calm network and the checker. Nothing here draws a random
// number or writes a trace record.
func newGroup(o Options, cfg dledger.Config) *sim {
	s := &sim{opt: o, cfg: cfg, quorum: memberstate.QuorumSize(o.Members)}
	stream := s.stream
	s.rngFault, s.rngNet, s.rngLedger, s.rngDisk = stream(1), stream(2), stream(3), stream(4)
	s.rngSidecar = stream(9)
	s.rngConnect = stream(10)
	s.rngReconf = stream(11)
	parts := make([]string, o.Members)
	ids := make([]string, o.Members)
	for i := range parts {
		ids[i] = fmt.Sprintf("n%d", i)
		parts[i] = fmt.Sprintf("%s-10.0.0.%d:20911", ids[i], i+1)
	}
	if s.reconfigOn() { // spares (reconfig.go): members the initial configuration leaves out
		for i := o.Members; i < o.Members+reconfigSpares; i++ {
			ids = append(ids, fmt.Sprintf("n%d", i))
		}
	}
	peers, err := memberstate.ParsePeers(strings.Join(parts, ";"))
	if err != nil {
		panic(err) // the ids and addresses above are well formed
	}
	s.peers = peers
	s.tr = newTracer(o.Trace, ids)
	for i, id := range ids {
		st := memberstate.NewMemStore()
		st.ForgetOnCrash(o.Broken == BrokenForgetOnCrash)
		s.members = append(s.members, &member{idx: i, id: id, store: st, ledger: memberstate.EmptyLedger})
	}
	s.net = newNetwork(len(ids), o.RPCTimeout)
	s.chk = newChecker(s)
	return s
}

// stream is the run's random stream number k: streams are independent, so drawing more from
// one leaves the others' sequences as they were.
func (s *sim) stream(k uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.opt.Seed, 0x5eed0000+k))
}

// at queues fn to run d after now.
func (s *sim) at(d time.Duration, fn func()) {
	s.seq++
	s.q.push(event{at: s.now + d, seq: s.seq, fn: fn})
}

// inPhase queues fn to run d after now, unless the phase has changed by then.
func (s *sim) inPhase(d time.Duration, fn func()) {
	id := s.phaseID
	s.at(d, func() {
		if s.phaseID == id {
			fn()
		}
	})
}

func (s *sim) run() error {
	delays := s.startDelays()
	var lastStart time.Duration
	for _, m := range s.members {
		if d := delays[m.idx]; d > 0 {
			lastStart = max(lastStart, d)
			s.at(d, func() {
				if err := s.startMember(m); err != nil {
					s.fail("SIM", "%v", err)
					return
				}
				s.note("%s starts (staggered start)", m.id)
			})
			continue
		}
		if err := s.startMember(m); err != nil {
			return err
		}
	}
	s.check()
	s.at(0, s.ledgerStep)
	begin := func() {
		switch s.opt.Scenario {
		case ScenarioRejoin:
			s.beginRejoin()
		default:
			s.beginHeal("start")
		}
	}
	if lastStart > 0 {
		s.at(lastStart, begin) // queued after the last start at that instant
	} else {
		begin()
	}
	for s.q.len() > 0 && s.violation == nil && !s.finished {
		s.step()
	}
	return nil
}

// step runs the next event and checks the invariants after it.
func (s *sim) step() {
	ev := s.q.pop()
	s.now = ev.at
	s.steps++
	if ev.tick {
		s.tick(ev.m, ev.inc, ev.gen)
	} else {
		ev.fn()
	}
	if s.violation == nil {
		s.check()
	}
	if s.steps >= maxSteps && s.violation == nil {
		s.fail("SIM", "the run did not end within %d steps", maxSteps)
	}
}

// fail stops the run with a violation (the first one wins).
func (s *sim) fail(inv, format string, args ...any) {
	if s.violation != nil {
		return
	}
	detail := fmt.Sprintf(format, args...)
	s.tr.add(record{at: s.now, kind: rNote, a: -1, b: -1, note: "VIOLATION " + inv + ": " + detail})
	s.violation = &Violation{Invariant: inv, Detail: detail, At: s.now, Tail: s.tr.tail(), Replay: ReplayCommand(s.opt)}
}

func (s *sim) note(format string, args ...any) {
	s.tr.add(record{at: s.now, kind: rNote, a: -1, b: -1, note: fmt.Sprintf(format, args...)})
}

func (s *sim) member(id string) *member {
	for _, m := range s.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (s *sim) preferredUp() bool {
	for _, m := range s.members {
		if m.id == s.preferred {
			return m.up
		}
	}
	return false
}

// finalLeader is the leader when the run ended ("" if none).
func (s *sim) finalLeader() string {
	if l := s.leader(); l != nil {
		return l.id
	}
	return ""
}

func (s *sim) result() Result {
	replay := s.opt
	replay.Trace = nil
	return Result{
		Seed: s.opt.Seed, Members: s.opt.Members, Profile: s.opt.Profile, Scenario: s.opt.Scenario,
		Violation: s.violation, Elections: s.chk.elections, MaxTerm: s.chk.maxTermSeen(),
		TermsUsed: s.chk.maxTermSeen() - s.startTerm, Extreme: s.extreme, Sidecar: s.sidecar,
		Staggered:      s.staggered,
		CeilingReached: s.ceilingReached(),
		SimTime:        s.now, Steps: s.steps, Heals: s.live.heals, MaxRecovery: s.live.maxRecovery,
		Bound: L1Bound(s.cfg), TraceHash: s.tr.hash, ReplayOptions: replay,
		Preferred: s.preferred, FinalLeader: s.finalLeader(), PreferredUp: s.preferredUp(),
	}
}
