package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/campaign"
	hostlive "github.com/dledger-go/dledger/dledger/liveness"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Hosts of many groups (Options.Hosts > 0; docs/protocol.md section 12).
//
// A host is a process that carries one member of each of many groups, and a liveness table
// (dledger/liveness) shared by all of them. The run has Options.Hosts hosts and Options.Groups
// groups of Options.Members members each; member k of group g lives on host (g+k) mod Hosts, so
// with as many members as hosts every host is a member of every group. Each group is a sim of
// its own (its members, network, checker: S1-S5 and the PASS oracle after every one of its
// events), and the groups share one virtual clock: the host run always runs the earliest event
// of any group or of its own queue. Its own queue carries the host-level events: the tables'
// frames and acknowledgements, which travel between hosts on a simulated network of their own
// (delay, jitter, loss, cut host pairs), and the host faults. A table's wake schedules the
// member's pass at once, as server.Host's driver does.
//
// In half the seeds every group's ledger advances (ledger.go), so S4 meets the host faults;
// in half the fault phases an admin asks a few groups for a leadership transfer (L3).
// Host faults, one per fault phase: a crash (every member of the host and its table are gone;
// the peers' tables hear the closed sockets), a pause (SIGSTOP: nothing on the host runs, what
// reaches it waits), a restart (a crash and a start soon after: a new incarnation), a host
// isolated, or a cut between two hosts (both ways or one). Then a heal: every link mended,
// every host resumed and restarted, and L1 for every group. During a crash, pause or isolation
// of one host, L4 is checked from the fault's start: every group still has a quorum of members
// on the other hosts, up and connected, so it must have a leader there, followed by a quorum
// there, within L1Bound; a table that kept vouching for a gone host's leaders would fail it.

// hostRun is one run of hosts; only its goroutine touches it.
type hostRun struct {
	opt      Options
	cfg      dledger.Config
	now      time.Duration
	seq      uint64
	q        queue
	groups   []*sim
	hosts    []*simHost
	cut      [][]bool // cut[a][b]: frames from host a to host b are dropped
	p        linkParams
	rngFault *rand.Rand
	rngNet   *rand.Rand
	tr       *tracer
	phaseID  int
	// expect: the L1 or L4 check in progress (healthy: the hosts whose members count).
	expecting bool
	expectInv string
	expectAt  time.Duration
	expectID  int
	phaseEnd  time.Duration // when the current fault phase's length has passed
	healthy   []bool
	stable    []bool
	heals     int
	maxRec    time.Duration

	violation *Violation
	finished  bool
	steps     int
	// Counters for the idle measurement (MeasureIdle): frames sent between hosts; idle: no faults.
	frames int
	idle   bool
	// transfers counts the leadership transfers asked of the groups' leaders.
	transfers int
}

// simHost is one host process.
type simHost struct {
	idx    int
	id     string // its rpc address, as the groups' peers strings name it
	up     bool
	paused bool
	inc    uint64 // incarnation: 1, 2, ... (a restart takes the next)
	table  *hostlive.Table
	gate   *campaign.Gate // its members' bound on rounds run at once (campaignsFor)
	dueGen uint64
	held   []func() // frames and answers that reached it while paused
}

// hostAddr is host h's rpc address.
func hostAddr(h int) string { return fmt.Sprintf("10.0.1.%d:20911", h+1) }

// runHosts simulates one seed of hosts.
func runHosts(o Options, cfg dledger.Config) Result {
	hr := newHostRun(o, cfg)
	hr.run()
	return hr.result()
}

func newHostRun(o Options, cfg dledger.Config) *hostRun {
	hr := &hostRun{opt: o, cfg: cfg, p: calm}
	hr.rngFault = rand.New(rand.NewPCG(o.Seed, 0x40570001))
	hr.rngNet = rand.New(rand.NewPCG(o.Seed, 0x40570002))
	ids := make([]string, o.Hosts)
	for h := range o.Hosts {
		ids[h] = fmt.Sprintf("h%d", h)
		hr.hosts = append(hr.hosts, &simHost{idx: h, id: hostAddr(h)})
		hr.cut = append(hr.cut, make([]bool, o.Hosts))
	}
	hr.tr = newTracer(o.Trace, ids)
	if o.Trace != nil {
		fmt.Fprintf(o.Trace, "=== seed %d hosts=%d groups=%d members=%d profile=%s scenario=%s\n", o.Seed, o.Hosts, o.Groups, o.Members, o.Profile, o.Scenario)
	}
	for g := range o.Groups {
		gs := newGroup(Options{Seed: o.Seed*1_000_003 + uint64(g), Members: o.Members, RPCTimeout: o.RPCTimeout,
			Broken: o.Broken}, cfg)
		gs.name = fmt.Sprintf("g%d", g)
		if o.Trace != nil { // one trace, every group's lines prefixed with its name
			gs.tr.out = prefixWriter{w: o.Trace, prefix: gs.name + " "}
		}
		gs.hr, gs.gi = hr, g
		parts := make([]string, o.Members)
		for k := range parts {
			parts[k] = fmt.Sprintf("n%d-%s", k, hostAddr(hr.place(g, k)))
		}
		peers, err := memberstate.ParsePeers(strings.Join(parts, ";"))
		if err != nil {
			panic(err) // well formed above
		}
		gs.peers = peers
		hr.groups = append(hr.groups, gs)
	}
	return hr
}

// place is the host of member k of group g.
func (hr *hostRun) place(g, k int) int { return (g + k) % hr.opt.Hosts }

// at queues a host-level event.
func (hr *hostRun) at(d time.Duration, fn func()) {
	hr.seq++
	hr.q.push(event{at: hr.now + d, seq: hr.seq, fn: fn})
}

// inPhase queues fn unless the phase changes first.
func (hr *hostRun) inPhase(d time.Duration, fn func()) {
	id := hr.phaseID
	hr.at(d, func() {
		if hr.phaseID == id {
			fn()
		}
	})
}

// enter brings group g's clock to the run's before host-level code calls into it.
func (hr *hostRun) enter(g *sim) { g.now = hr.now }

func (hr *hostRun) note(format string, args ...any) {
	hr.tr.add(record{at: hr.now, kind: rNote, a: -1, b: -1, note: fmt.Sprintf(format, args...)})
}

func (hr *hostRun) fail(inv, format string, args ...any) {
	if hr.violation != nil {
		return
	}
	detail := fmt.Sprintf(format, args...)
	hr.tr.add(record{at: hr.now, kind: rNote, a: -1, b: -1, note: "VIOLATION " + inv + ": " + detail})
	hr.violation = &Violation{Invariant: inv, Detail: detail, At: hr.now, Tail: hr.tr.tail(), Replay: ReplayCommand(hr.opt)}
}

func (hr *hostRun) run() {
	for _, h := range hr.hosts {
		hr.startHost(h)
	}
	// Half the seeds run the ledger model (ledger.go) in every group: leaders append,
	// followers copy, so votes meet the ledger rule (S4) under host faults, while the quiet
	// heartbeats carry no ledger and the leader's view of a quiet follower's ledger ages.
	if hr.rngFault.IntN(2) == 0 {
		hr.note("every group's ledger advances")
		for _, g := range hr.groups {
			g.at(0, g.ledgerStep)
		}
	}
	hr.beginHeal("start")
	for hr.violation == nil && !hr.finished {
		if !hr.step() {
			break
		}
	}
}

// step runs the earliest event of the run's queue or of any group's (ties: the run's first,
// then the groups in order, then each queue's own order). It reports false when nothing is left.
func (hr *hostRun) step() bool {
	var best *sim
	at := time.Duration(-1)
	if hr.q.len() > 0 {
		at = hr.q.h[0].at
	}
	for _, g := range hr.groups {
		if g.q.len() > 0 && (at < 0 || g.q.h[0].at < at) {
			best, at = g, g.q.h[0].at
		}
	}
	if at < 0 {
		return false
	}
	hr.now = at
	hr.steps++
	if best == nil {
		ev := hr.q.pop()
		ev.fn()
	} else {
		best.step()
		if best.violation != nil {
			hr.takeViolation(best)
			return false
		}
		if hr.expecting && !hr.stable[best.gi] {
			hr.checkStable(best)
		}
	}
	if hr.steps >= maxSteps {
		hr.fail("SIM", "the run did not end within %d steps", maxSteps)
	}
	return true
}

// ---- hosts and their tables ----

// startHost starts host h: a new incarnation of its table and of every member it carries.
func (hr *hostRun) startHost(h *simHost) {
	h.up, h.paused, h.held = true, false, nil
	h.inc++
	inc := h.inc
	h.gate = campaign.New(hr.campaignBound())
	if !hr.opt.NoTable {
		t, err := hostlive.New(hostlive.Config{Self: h.id, Incarnation: h.inc, Interval: hr.cfg.HeartBeatInterval,
			Fresh: hr.cfg.DetectionWindow(), FreshMax: hr.opt.RPCTimeout + hr.cfg.HeartBeatInterval, // as server.Host's (host_live.go)
			Kick: func() {
				if h.up && h.inc == inc {
					hr.scheduleDue(h, 0)
				}
			}})
		if err != nil {
			panic(err)
		}
		h.table = t
	}
	hr.note("host %s starts (incarnation %d)", hr.tr.ids[h.idx], h.inc)
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) == h.idx {
				hr.enter(g)
				if m.inc == 0 && !m.up {
					if err := g.startMember(m); err != nil {
						hr.fail("SIM", "%v", err)
					}
				} else {
					g.restart(m)
				}
				g.check()
			}
		}
	}
	if h.table != nil {
		hr.scheduleDue(h, 0)
	}
}

// liveFor is the elector's seam for member m of group g: its host's table registers the
// member (its wake schedules its pass now, its news of a dead host goes to its elector),
// through the planted bugs if one is on. Nil without tables.
func (hr *hostRun) liveFor(g *sim, m *member) dledger.HostLiveness {
	h := hr.hosts[hr.place(g.gi, m.idx)]
	if h.table == nil {
		return nil
	}
	peerHost := map[string]string{}
	for _, p := range g.peers {
		peerHost[p.ID] = p.Addr
	}
	h.table.RemoveMember(g.name, m.id) // a member restarted on a running host
	inc := m.inc
	tell := func(gone string) { // as server.Host's: a wake, or the news of a dead host (gone.go)
		if gone == "" || hr.opt.Broken == BrokenGoneAsWake {
			hr.wake(g, m, inc)
			return
		}
		hr.tellGone(g, m, inc, gone)
	}
	if err := h.table.AddMemberTold(g.name, m.id, peerHost, tell); err != nil {
		panic(err)
	}
	var live dledger.HostLiveness = h.table.For(g.name, m.id)
	switch hr.opt.Broken {
	case BrokenHostNeverStale:
		live = neverStale{live}
	case BrokenRelyOnce:
		live = &relyOnce{Member: h.table.For(g.name, m.id)}
	}
	return live
}

// campaignBound is how many vote rounds a simulated host's members run at once
// (docs/protocol.md 12.6): a quarter of the groups, so that a host's start and the crash of a
// peer host make members wait in line, as a production host's start does with its default
// bound (and a peer's crash, where the crashed host led more groups than that bound).
func (hr *hostRun) campaignBound() int { return max(1, hr.opt.Groups/4) }

// campaignsFor is member m of group g's slot in its host's bound: the gate's wake runs its pass
// now, as the table's does.
func (hr *hostRun) campaignsFor(g *sim, m *member) dledger.CampaignSlot {
	h := hr.hosts[hr.place(g.gi, m.idx)]
	inc := m.inc
	return h.gate.Slot(func() { hr.wake(g, m, inc) })
}

// wake runs member m's pass now (its table stopped vouching for something it relied on).
func (hr *hostRun) wake(g *sim, m *member, inc int) {
	if !m.up || m.inc != inc {
		return
	}
	hr.enter(g)
	g.scheduleTick(m, hr.now)
}

// scheduleDue queues a call of h's table's Due d from now, voiding the one queued before.
func (hr *hostRun) scheduleDue(h *simHost, d time.Duration) {
	h.dueGen++
	gen, inc := h.dueGen, h.inc
	hr.at(d, func() {
		if !h.up || h.inc != inc || h.dueGen != gen || h.paused {
			return // a paused host's Due is rescheduled when it resumes
		}
		hr.due(h)
	})
}

// due sends h's frames and plans the next call.
func (hr *hostRun) due(h *simHost) {
	sentAt := epoch.Add(hr.now)
	for _, o := range h.table.Due(sentAt) {
		hr.sendFrame(h, hr.hostByID(o.To), o.Frame, sentAt)
	}
	next := h.table.NextDue(epoch.Add(hr.now)).Sub(epoch)
	hr.scheduleDue(h, max(next-hr.now, 0))
}

func (hr *hostRun) hostByID(id string) *simHost {
	for _, h := range hr.hosts {
		if h.id == id {
			return h
		}
	}
	panic("sim: no host " + id)
}

// fate draws a host message's delay, or reports it lost.
func (hr *hostRun) fate() (time.Duration, bool) {
	p := &hr.p
	if p.loss > 0 && hr.rngNet.Float64() < p.loss {
		return 0, true
	}
	d := p.delayMin
	if p.jitter > 0 {
		d += time.Duration(hr.rngNet.Int64N(int64(p.jitter)))
	}
	return d, false
}

// sendFrame carries a frame from a to b and b's answer back. A frame to a host that is down
// (and not behind a cut) fails at once: nothing listens there, the link is closed (Failed).
func (hr *hostRun) sendFrame(a, b *simHost, f hostlive.Frame, sentAt time.Time) {
	hr.frames++
	if !b.up && !hr.cut[a.idx][b.idx] {
		a.table.Failed(b.id, sentAt)
		a.table.Lost(b.id, f.Seq)
		return
	}
	c := &frameCall{hr: hr, a: a, b: b, f: f, sentAt: sentAt, aInc: a.inc, bInc: b.inc}
	hr.at(hr.opt.RPCTimeout, c.timeout)
	if d, lost := hr.fate(); !lost {
		hr.at(d, c.arrive)
	}
}

// frameCall is one frame's call from host a to host b: its arrival, its answer's, and the call
// timeout after which the frame is lost to a (the changes it carried go again), as a host
// heartbeat's call that times out; a later answer is then dropped, as a timed-out call's is.
type frameCall struct {
	hr         *hostRun
	a, b       *simHost
	f          hostlive.Frame
	sentAt     time.Time
	aInc, bInc uint64
	done       bool // answered, or timed out
}

func (c *frameCall) aliveAt(h *simHost, inc uint64) bool { return h.up && h.inc == inc }

func (c *frameCall) timeout() {
	if c.done || !c.aliveAt(c.a, c.aInc) {
		return
	}
	c.a.runOrHold(func() {
		if !c.done && c.aliveAt(c.a, c.aInc) {
			c.done = true
			c.a.table.Lost(c.b.id, c.f.Seq)
		}
	})
}

func (c *frameCall) arrive() {
	if !c.aliveAt(c.b, c.bInc) || c.hr.cut[c.a.idx][c.b.idx] {
		return
	}
	c.b.runOrHold(c.deliver)
}

func (c *frameCall) deliver() {
	if !c.aliveAt(c.b, c.bInc) {
		return
	}
	ack := c.b.table.Received(c.a.id, c.f, epoch.Add(c.hr.now))
	d, lost := c.hr.fate()
	if lost {
		return
	}
	c.hr.at(d, func() {
		if !c.aliveAt(c.a, c.aInc) || c.hr.cut[c.b.idx][c.a.idx] {
			return
		}
		c.a.runOrHold(func() {
			if c.aliveAt(c.a, c.aInc) && !c.done {
				c.done = true
				c.a.table.Answered(c.b.id, c.sentAt, ack, epoch.Add(c.hr.now))
			}
		})
	})
}

// runOrHold runs fn now, or, while host h is paused, when it resumes: a stopped process
// handles what reached it only once it runs again.
func (h *simHost) runOrHold(fn func()) {
	if h.paused {
		h.held = append(h.held, fn)
		return
	}
	fn()
}

// ---- host faults ----

// crashHost kills host h: every member it carries, and its table. The survivors hear the
// closed links after a network delay, unless the link is cut (announceHostGone, gone.go).
func (hr *hostRun) crashHost(h *simHost) {
	if !h.up {
		return
	}
	hr.note("host %s crashes", hr.tr.ids[h.idx])
	h.up, h.paused, h.held, h.table = false, false, nil, nil
	hr.crashMembersOn(h)
	hr.announceHostGone(h)
}

// crashMembersOn crashes every live member host h carries, each checked in its group's run.
func (hr *hostRun) crashMembersOn(h *simHost) {
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) == h.idx && m.up {
				hr.enter(g)
				g.crash(m)
				g.check()
			}
		}
	}
}

// pauseHost stops host h (SIGSTOP): no pass, no Due; what reaches it waits.
func (hr *hostRun) pauseHost(h *simHost) {
	if !h.up || h.paused {
		return
	}
	hr.note("host %s paused", hr.tr.ids[h.idx])
	h.paused = true
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) == h.idx && m.up {
				m.stopped = true
				m.stops++
			}
		}
	}
}

// resumeHost continues a paused host: each member's first pass before or after what reached
// it (as Cluster.Resume), then the table's held frames and a Due, late (the table sees the stall).
func (hr *hostRun) resumeHost(h *simHost) {
	if !h.paused {
		return
	}
	hr.note("host %s resumed", hr.tr.ids[h.idx])
	h.paused = false
	for _, g := range hr.groups {
		for _, m := range g.members {
			if hr.place(g.gi, m.idx) != h.idx || !m.stopped {
				continue
			}
			hr.enter(g)
			m.stopped = false
			g.touch(m)
			if hr.rngFault.IntN(2) == 0 {
				m.e.Tick()
				m.e.NextPassAt()
			}
			held := m.held
			m.held = nil
			for _, f := range held {
				f()
			}
			g.check()
			if g.violation != nil {
				return
			}
		}
	}
	held := h.held
	h.held = nil
	for _, f := range held {
		f()
	}
	if h.table != nil {
		hr.scheduleDue(h, 0)
	}
}

// cutHosts cuts (or mends) the directed link a -> b: host frames and every group's messages.
func (hr *hostRun) cutHosts(a, b *simHost, cut bool) {
	if hr.cut[a.idx][b.idx] == cut {
		return
	}
	hr.cut[a.idx][b.idx] = cut
	if cut {
		hr.note("link %s->%s cut", hr.tr.ids[a.idx], hr.tr.ids[b.idx])
	}
	for _, g := range hr.groups {
		var ma, mb *member
		for _, m := range g.members {
			switch hr.place(g.gi, m.idx) {
			case a.idx:
				ma = m
			case b.idx:
				mb = m
			}
		}
		if ma == nil || mb == nil {
			continue
		}
		hr.enter(g)
		if cut {
			g.cutLink(ma, mb)
		} else {
			g.net.cut[ma.idx][mb.idx] = false
			if ma.up && mb.up && !g.net.cut[mb.idx][ma.idx] {
				g.connectLater(ma, mb)
				g.connectLater(mb, ma)
			}
		}
	}
}

// setParams sets the network of hosts and of every group.
func (hr *hostRun) setParams(p linkParams) {
	hr.p = p
	for _, g := range hr.groups {
		g.net.p = p
	}
}

// beginFault starts a fault phase of 1-4 detection windows with one host fault.
func (hr *hostRun) beginFault() {
	hr.phaseID++
	r := hr.rngFault
	dw := hr.cfg.DetectionWindow()
	length := between(r, dw, 4*dw)
	p := calm
	if r.IntN(3) == 0 {
		p.loss = pick(r, 0.01, 0.05)
	}
	hr.setParams(p)
	h := hr.hosts[r.IntN(len(hr.hosts))]
	if r.IntN(2) == 0 { // half the time the host that leads the most groups
		h = hr.busiestLeader()
	}
	kind := r.IntN(5)
	hr.tr.add(record{at: hr.now, kind: rPhase, a: -1, b: -1, note: fmt.Sprintf("host fault %d on %s for %v: %v", kind, hr.tr.ids[h.idx], length, p)})
	// Half the phases also see an admin ask 1-3 groups' leaders for a transfer (L3), whose
	// transferee's ledger a quiet leader may know only as of its last explicit heartbeat.
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(3) {
			g := hr.groups[r.IntN(len(hr.groups))]
			hr.inPhase(between(r, 0, length), func() { hr.transfer(g) })
		}
	}
	// A crash, pause or isolation holds until L4 is decided (the other hosts elect a leader
	// for every group), then for the rest of the phase; the other faults last the phase.
	hr.phaseEnd = hr.now + length
	switch kind {
	case 0: // crash
		hr.crashHost(h)
		hr.expectAll("L4", h)
	case 1: // pause (SIGSTOP)
		hr.pauseHost(h)
		hr.expectAll("L4", h)
	case 2: // restart: a crash and a start soon after (a new incarnation)
		hr.crashHost(h)
		hr.inPhase(between(r, 0, dw/2), func() { hr.startHost(h) })
		hr.inPhase(length, func() { hr.beginHeal("heal") })
	case 3: // isolate
		for _, o := range hr.hosts {
			if o != h {
				hr.cutHosts(h, o, true)
				hr.cutHosts(o, h, true)
			}
		}
		hr.expectAll("L4", h)
	case 4: // a cut between two hosts, both ways or one
		o := hr.hosts[(h.idx+1+r.IntN(len(hr.hosts)-1))%len(hr.hosts)]
		hr.cutHosts(h, o, true)
		if r.IntN(2) == 0 {
			hr.cutHosts(o, h, true)
		}
		hr.inPhase(length, func() { hr.beginHeal("heal") })
	}
}

// transfer asks group g's leader for a transfer to a random member, as an admin would (L3,
// transfer.go); nothing if the leader's host is stopped (an admin's request waits with it).
func (hr *hostRun) transfer(g *sim) {
	if l := g.leader(); l == nil || l.stopped {
		return
	}
	hr.enter(g)
	hr.transfers++
	g.transfer()
	g.check()
	if g.violation != nil && hr.violation == nil {
		hr.takeViolation(g)
	}
}

// takeViolation makes group g's violation the run's, named by the group and replayable.
func (hr *hostRun) takeViolation(g *sim) {
	v := *g.violation
	v.Detail = g.name + ": " + v.Detail
	v.Replay = ReplayCommand(hr.opt)
	hr.violation = &v
}

// busiestLeader is the up host whose members lead the most groups (the first on a tie).
func (hr *hostRun) busiestLeader() *simHost {
	counts := make([]int, len(hr.hosts))
	for _, g := range hr.groups {
		if l := g.leader(); l != nil {
			counts[hr.place(g.gi, l.idx)]++
		}
	}
	best := 0
	for i, c := range counts {
		if c > counts[best] {
			best = i
		}
	}
	return hr.hosts[best]
}

// beginHeal mends every link, resumes and restarts every host, and checks L1 for every group.
func (hr *hostRun) beginHeal(why string) {
	hr.phaseID++
	hr.tr.add(record{at: hr.now, kind: rPhase, a: -1, b: -1, note: "hosts heal (" + why + ")"})
	hr.setParams(calm)
	for _, a := range hr.hosts {
		for _, b := range hr.hosts {
			if a != b {
				hr.cutHosts(a, b, false)
			}
		}
	}
	for _, h := range hr.hosts {
		hr.resumeHost(h)
		if !h.up {
			hr.startHost(h)
		}
	}
	if hr.violation != nil {
		return
	}
	hr.expectAll("L1", nil)
}

// expectAll starts the liveness check inv: every group must have a leader on a host other
// than down, followed by a quorum of members on such hosts, within L1Bound. Then, after a
// pause, the next fault phase, or the end of the run.
func (hr *hostRun) expectAll(inv string, down *simHost) {
	hr.expecting, hr.expectInv, hr.expectAt = true, inv, hr.now
	hr.expectID++
	hr.healthy = make([]bool, len(hr.hosts))
	for i := range hr.healthy {
		hr.healthy[i] = hr.hosts[i] != down
	}
	hr.stable = make([]bool, len(hr.groups))
	for _, g := range hr.groups {
		hr.checkStable(g)
	}
	id, bound := hr.expectID, L1Bound(hr.cfg)
	hr.at(bound, func() {
		if !hr.expecting || hr.expectID != id {
			return
		}
		for gi, ok := range hr.stable {
			if !ok {
				g := hr.groups[gi]
				hr.fail(inv, "%s: no leader followed by a quorum on the healthy hosts within %v (L1Bound) of the %s: %s",
					g.name, bound, map[string]string{"L1": "heal", "L4": "host fault"}[inv], hr.describe(g))
				return
			}
		}
	})
}

// checkStable marks group g once it has a stable leader on the healthy hosts; when every group
// has one, the check ends.
func (hr *hostRun) checkStable(g *sim) {
	if !hr.hostStable(g) {
		return
	}
	hr.stable[g.gi] = true
	for _, ok := range hr.stable {
		if !ok {
			return
		}
	}
	rec := hr.now - hr.expectAt
	hr.maxRec = max(hr.maxRec, rec)
	hr.expecting = false
	if hr.idle {
		return // MeasureIdle, MeasureFailover: no fault phases
	}
	if hr.expectInv == "L4" { // the fault holds for the rest of its phase; the heal checks L1
		hr.inPhase(max(hr.phaseEnd-hr.now, 0), func() { hr.beginHeal("heal") })
		return
	}
	hr.heals++
	id := hr.phaseID
	hr.at(between(hr.rngFault, 0, hr.cfg.DetectionWindow()), func() {
		if hr.phaseID != id {
			return
		}
		if hr.now >= hr.opt.Duration {
			hr.finished = true
			return
		}
		hr.beginFault()
	})
}

// hostStable: a leader on a healthy host, up and not stopped, followed at its term by a
// quorum of members on healthy hosts.
func (hr *hostRun) hostStable(g *sim) bool {
	ok := func(m *member) bool { return m.up && !m.stopped && hr.healthy[hr.place(g.gi, m.idx)] }
	for _, l := range g.members {
		if !ok(l) || l.ms.Role() != protocol.LEADER {
			continue
		}
		term, n := l.ms.CurrTerm(), 1
		for _, f := range g.members {
			if f != l && ok(f) && f.ms.Role() == protocol.FOLLOWER && f.ms.LeaderID() == l.id && f.ms.CurrTerm() == term {
				n++
			}
		}
		if n >= g.quorum {
			return true
		}
	}
	return false
}

// describe is one line on group g's members: host, role, term, leader.
func (hr *hostRun) describe(g *sim) string {
	var b strings.Builder
	for _, m := range g.members {
		h := hr.tr.ids[hr.place(g.gi, m.idx)]
		if !m.up {
			fmt.Fprintf(&b, "[%s@%s down] ", m.id, h)
			continue
		}
		fmt.Fprintf(&b, "[%s@%s %v term=%d leader=%q stopped=%v] ", m.id, h, m.ms.Role(), m.ms.CurrTerm(), m.ms.LeaderID(), m.stopped)
	}
	return strings.TrimSpace(b.String())
}

func (hr *hostRun) result() Result {
	replay := hr.opt
	replay.Trace = nil
	hash := hr.tr.hash
	elections, steps, maxTerm := 0, hr.steps, int64(0)
	for _, g := range hr.groups {
		hash = (hash ^ g.tr.hash) * fnvPrime
		elections += g.chk.elections
		maxTerm = max(maxTerm, g.chk.maxTermSeen())
	}
	return Result{Seed: hr.opt.Seed, Members: hr.opt.Members, Profile: hr.opt.Profile, Scenario: hr.opt.Scenario,
		Violation: hr.violation, Elections: elections, MaxTerm: maxTerm, TermsUsed: maxTerm, SimTime: hr.now, Steps: steps, Heals: hr.heals,
		MaxRecovery: hr.maxRec, Bound: L1Bound(hr.cfg), TraceHash: hash, ReplayOptions: replay,
		Hosts: hr.opt.Hosts, Groups: hr.opt.Groups, Transfers: hr.transfers}
}

// neverStale is the host-never-stale bug (broken.go): the seam vouches for every peer its
// table has ever heard of, as if its host were always fresh and its members never changed.
type neverStale struct{ dledger.HostLiveness }

func (n neverStale) Peer(id string, epoch uint64, since, now time.Time) (heard, acked time.Time, ok bool) {
	heard, acked, ok = n.HostLiveness.Peer(id, epoch, since, now)
	if !ok && !heard.IsZero() {
		return now, now, true
	}
	return heard, acked, ok
}

// relyOnce is the rely-once bug (broken.go): the table keeps the first reliance a member
// incarnation tells it (Member.Rely), so its index of the members that depend on a peer host
// alone, and its wakes, keep following the leader a follower named first.
type relyOnce struct {
	*hostlive.Member
	said bool
}

func (r *relyOnce) Rely(quorum, also []string, need int) bool {
	if r.said {
		return true
	}
	r.said = r.Member.Rely(quorum, also, need)
	return r.said
}

// prefixWriter writes each line (one Write per line, as the tracer writes) after a prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
