package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/internal/bugs"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// member is one simulated process. Its store and its ledger outlive crashes; its MemberState
// and Elector do not.
type member struct {
	idx   int
	id    string
	store *memberstate.MemStore
	ms    *memberstate.MemberState // nil while down
	e     *dledger.Elector         // nil while down
	up    bool
	// inc is the incarnation, bumped at every crash. Ticks and send callbacks carry the
	// incarnation they belong to, so nothing reaches an elector instance that has crashed.
	inc int
	// ledger is the embedding storage's ledger end: it survives a crash, like a disk.
	ledger   memberstate.LedgerEnd
	lagging  bool // replication skips this member for the rest of the phase
	diskFail bool // its vote store fails every save
	// takeReqs counts the leadership-transfer requests delivered to it (L3, transfer.go).
	takeReqs uint64
	// unreported: a restarted sidecar whose storage has not reported the ledger to the elector
	// yet (start.go); ledger changes meanwhile reach only m.ledger.
	unreported bool
	// stopped: the process is frozen (SIGSTOP, Cluster.Stop): it makes no pass, and what reaches
	// it waits in held, as in its socket buffers, until Cluster.Resume (or, in a run with
	// reconfigurations, resume: reconfig.go). Never set in other runs.
	stopped bool
	held    []func()
	// stops counts the times the member was stopped: L3 does not hold a member to its bound
	// across a stop (transfer.go), as a process frozen meanwhile cannot answer in time.
	stops int
	// The member's next pass, as production's driver schedules it (dledger/driver): at the
	// time its elector's NextPassAt names, moved by the elector's alarm when an event makes it
	// due sooner, or later while it is not due yet.
	// tickGen voids the ticks queued before a reschedule; sameInstant counts passes run at one
	// virtual instant (a pass that leaves itself due again and again would spin the driver).
	nextTick time.Duration
	// plannedAt is the pass the elector last told the alarm (its own NextPassAt), and planned
	// says this incarnation has told it one: the PASS oracle's reference (passes.go).
	plannedAt   time.Duration
	planned     bool
	tickGen     uint64
	sameInstant int
	lastTickAt  time.Duration
}

// memberStore is the Store a member's MemberState writes to: its MemStore (which outlives
// crashes), through the simulator's torn-write fault (faults.go).
type memberStore struct {
	*memberstate.MemStore
	s *sim
	m *member
}

func (st memberStore) Save(d memberstate.Durable) error {
	st.s.maybeTear(st.m, d)
	return st.MemStore.Save(d)
}

// vclock reads the virtual time.
type vclock struct{ s *sim }

func (c vclock) Now() time.Time { return epoch.Add(c.s.now) }

// pcgRand is a member incarnation's private random source.
type pcgRand struct{ r *rand.Rand }

func (p pcgRand) Int63n(n int64) int64 { return p.r.Int64N(n) }

// startMember builds a new Elector over the member's store (a start or a
// restart), hands it the ledger end and schedules its StateMaintainer passes.
func (s *sim) startMember(m *member) error {
	// The member's randomness depends on the run seed, the member and the incarnation only.
	rnd := pcgRand{rand.New(rand.NewPCG(s.opt.Seed^0x6d656d62, uint64(m.idx)<<32|uint64(m.inc)))}
	ep := &endpoint{s: s, m: m, inc: m.inc}
	who := s.memberOf(m)
	var live dledger.HostLiveness
	var campaigns dledger.CampaignSlot // a host's bound on rounds run at once (hosts.go)
	if s.hr != nil {
		live = s.hr.liveFor(s, m)
		campaigns = s.hr.campaignsFor(s, m)
	}
	e, err := dledger.New(s.cfg, who, s.electorOptions(dledger.Options{Clock: vclock{s}, Rand: rnd, Transport: ep,
		LedgerFromStorage: s.sidecar || s.harness.fromStorage(), Liveness: live, SpreadStartup: live != nil,
		Campaigns: campaigns}, ep))
	if err != nil {
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	bugs.Set(e, s.opt.Broken.bugs())
	m.ms, m.e, m.up = bugs.MemberState(e), e, true
	// The driver's alarm, as production's (dledger/driver): the elector moves m's next pass
	// whenever an entry point makes it due earlier, or later while it is not due yet.
	inc := m.inc
	m.planned = false
	e.SetPassAlarm(func(at time.Time) {
		if m.up && m.inc == inc {
			m.plannedAt, m.planned = at.Sub(epoch), true
			s.scheduleTick(m, max(at.Sub(epoch), s.now))
		}
	})
	switch {
	case s.harness != nil && m.unreported: // Cluster.RestartUnreported: the test reports later
	case s.sidecar && m.inc > 0: // a restart (inc counts crashes): the report comes later
		s.reportLater(m)
	default:
		if err := e.UpdateLedger(m.ledger.Term, m.ledger.Index); err != nil {
			return fmt.Errorf("start %s: %w", m.id, err)
		}
	}
	s.touch(m)
	s.announceReachable(m)
	// A random phase within the first pass, so members do not tick in lockstep; a Cluster's
	// members pass together, on one grid.
	var first time.Duration
	if s.harness == nil {
		first = time.Duration(s.rngFault.Int64N(int64(s.cfg.MaintainInterval)))
	} else {
		first = s.cfg.MaintainInterval - s.now%s.cfg.MaintainInterval
	}
	s.scheduleTick(m, s.now+first)
	return nil
}

// scheduleTick queues m's next pass at virtual time at, voiding the one queued before.
func (s *sim) scheduleTick(m *member, at time.Duration) {
	m.tickGen++
	m.nextTick = at
	s.seq++
	s.q.push(event{at: at, seq: s.seq, tick: true, m: m, inc: m.inc, gen: m.tickGen})
}

// maxPassesAtOneInstant bounds the passes one member runs at one virtual instant: a pass may
// leave another due at once (a round it decided asks for an immediate re-vote), but a pass that
// always does would spin production's driver.
const maxPassesAtOneInstant = 8

// tick runs one StateMaintainer pass and schedules the next, unless the member has crashed
// or been rescheduled since the tick was queued. A stopped member makes no pass: it is polled
// every MaintainInterval without asking its elector, so when it resumes its first pass runs
// late, as a stopped process's timer does.
func (s *sim) tick(m *member, inc int, gen uint64) {
	if !m.up || m.inc != inc || m.tickGen != gen {
		return
	}
	if m.stopped {
		s.scheduleTick(m, s.now+s.cfg.MaintainInterval)
		return
	}
	if s.now == m.lastTickAt {
		m.sameInstant++
		if m.sameInstant > maxPassesAtOneInstant {
			s.fail("SIM", "%s ran %d passes at %v: a pass leaves itself due (the driver would spin)", m.id, m.sameInstant, s.now)
			return
		}
	} else {
		m.lastTickAt, m.sameInstant = s.now, 1
	}
	s.touch(m)
	s.passes++
	m.e.Tick()
	m.e.NextPassAt() // the alarm queues the next pass
}

// crash drops the elector (in-flight callbacks to it will be discarded) and tells the store,
// which keeps what it saved unless the forget-on-crash bug is switched on.
func (s *sim) crash(m *member) {
	if !m.up {
		return
	}
	s.tr.add(record{at: s.now, kind: rCrash, a: int8(m.idx), b: -1, term: m.ms.CurrTerm()})
	s.chk.takeEvents(m) // events the elector produced before it died still count
	// The MemberState holds what the last successful Save wrote; the store may hold a torn
	// write beyond it (maybeTear), which the crash keeps or not.
	held := memberstate.Durable{Term: m.ms.CurrTerm(), VoteFor: m.ms.VoteFor()}
	written, _ := m.store.Load()
	m.up, m.e, m.ms = false, nil, nil
	m.stopped, m.held = false, nil // a killed process loses what waited in its sockets
	s.announceGone(m)
	m.inc++
	m.store.Crash()
	if written != held {
		after, _ := m.store.Load()
		s.tr.add(record{at: s.now, kind: rStore, a: int8(m.idx), b: -1, term: written.Term,
			note: fmt.Sprintf("the crash found a torn write (term=%d voteFor=%s) and kept it: %v", written.Term, voteName(written.VoteFor), after == written)})
	}
}

// restart builds a new incarnation from the same store and ledger.
func (s *sim) restart(m *member) {
	if m.up {
		return
	}
	if err := s.startMember(m); err != nil {
		s.fail("SIM", "%v", err)
		return
	}
	s.tr.add(record{at: s.now, kind: rRestart, a: int8(m.idx), b: -1, term: m.ms.CurrTerm(),
		x: m.ledger.Term, y: m.ledger.Index, note: voteName(m.ms.VoteFor())})
}

func voteName(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// setLedger changes a member's ledger end and tells its elector, as the embedding storage does.
func (s *sim) setLedger(m *member, l memberstate.LedgerEnd) {
	m.ledger = l
	if m.up && !m.unreported {
		s.touch(m)
		if err := m.e.UpdateLedger(l.Term, l.Index); err != nil {
			s.fail("SIM", "UpdateLedger(%d, %d) on %s: %v", l.Term, l.Index, m.id, err)
		}
	}
}

// endpoint is one member incarnation's Transport.
type endpoint struct {
	s   *sim
	m   *member
	inc int
	// gaveUp: this incarnation lost a round under the no-revote bug; its vote requests never
	// leave again (broken.go).
	gaveUp bool
}

func (ep *endpoint) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	c := ep.s.newCall(mVote, ep, to, req.Term, req.LedgerEndTerm, req.LedgerEndIndex)
	switch {
	case ep.gaveUp:
		ep.s.tr.add(record{at: ep.s.now, kind: rDrop, msg: c.msg, a: int8(c.from.idx), b: int8(c.to.idx), call: c.id,
			note: "no-revote: the candidate gave up"})
		expire(ep.s, c, ep.s.net.timeout, done)
		return
	case ep.s.opt.Broken == BrokenAcceptHasLeader:
		done = acceptHasLeader(done)
	}
	transmit(ep.s, c, ep.s.net.timeout, req, done, ep.s.handleVote)
}

func (ep *endpoint) SendHeartBeat(to string, req *protocol.HeartBeatRequest, done func(*protocol.HeartBeatResponse, error)) {
	c := ep.s.newCall(mHeartBeat, ep, to, req.Term, 0, 0)
	transmit(ep.s, c, ep.s.net.timeout, req, done, ep.s.handleHeartBeat)
}

func (ep *endpoint) SendLeadershipTransfer(to string, req *protocol.LeadershipTransferRequest, done func(*protocol.LeadershipTransferResponse, error)) {
	c := ep.s.newCall(mTransfer, ep, to, req.Term, req.TakeLeadershipLedgerIndex, 0)
	// The transferee answers after its own election, so this call waits longer (as the rpc
	// client's documentation asks of a real deployment).
	transmit(ep.s, c, ep.s.net.timeout+ep.s.cfg.TransferBound(), req, done, ep.s.handleTransfer)
}

// announceReachable models the transport's new connections (rpc.ClientOptions.OnPeerConnected,
// Elector.PeerReachable): a member that starts and every running member whose link to it
// carries packets both ways connect to each other, and each side's elector hears of it once its
// connection is up. A connection takes two network delays (the TCP and the authentication
// handshakes), drawn from a stream of its own so that the rest of a seed's schedule is as it
// was. mend announces the connections a heal brings back.
func (s *sim) announceReachable(m *member) {
	for _, p := range s.members {
		if p != m && p.up {
			s.connectLater(m, p)
			s.connectLater(p, m)
		}
	}
}

// connectLater tells from's elector, after a connection's delay, that to is reachable: unless
// either has crashed since or the link is cut by then. A stopped member hears it when it resumes.
func (s *sim) connectLater(from, to *member) {
	if s.net.cut[from.idx][to.idx] || s.net.cut[to.idx][from.idx] {
		return
	}
	p := &s.net.p
	d := 2 * p.delayMin
	if p.jitter > 0 {
		d += time.Duration(s.rngConnect.Int64N(2 * int64(p.jitter)))
	}
	fromInc, toInc := from.inc, to.inc
	var deliver func()
	deliver = func() {
		if !from.up || from.inc != fromInc || !to.up || to.inc != toInc ||
			s.net.cut[from.idx][to.idx] || s.net.cut[to.idx][from.idx] {
			return
		}
		if from.stopped {
			from.held = append(from.held, deliver)
			return
		}
		s.touch(from)
		from.e.PeerReachable(to.id)
	}
	s.at(d, deliver)
}

// announceGone models what a crash does to the sockets: the kernel closes the dead process's
// connections, and a peer that sees its connection closed and its redial refused tells its
// elector the process is gone (rpc.ClientOptions.OnPeerGone, Elector.PeerGone). Only where
// the link carries packets: a cut link delivers no close and no refusal. The news travels
// like a message (a network delay, maybe lost) and finds the peer as it is then. On hosts of
// many groups with tables the host's shared links carry it instead (announceHostGone); hosts
// without tables keep a connection per member pair, as server.Host with PerMemberLinks does.
func (s *sim) announceGone(dead *member) {
	if s.hr != nil && !s.hr.opt.NoTable {
		return // a host's links carry it, once per host (gone.go)
	}
	for _, p := range s.members {
		if p == dead || !p.up || s.net.cut[dead.idx][p.idx] {
			continue
		}
		d, lost := s.fate()
		if lost {
			continue
		}
		inc := p.inc
		s.at(d, func() { s.deliverGone(p, inc, dead) })
	}
}

// deliverGone hands "dead's process is gone" to p's elector, unless p has crashed since or
// dead has come back (its redial would have succeeded).
func (s *sim) deliverGone(p *member, inc int, dead *member) {
	if !p.up || p.inc != inc || (dead.up && s.opt.Broken != BrokenGoneOnCut) {
		return
	}
	if p.stopped {
		p.held = append(p.held, func() { s.deliverGone(p, inc, dead) })
		return
	}
	s.note("%s hears that %s's process is gone", p.id, dead.id)
	s.touch(p)
	p.e.PeerGone(dead.id)
}
