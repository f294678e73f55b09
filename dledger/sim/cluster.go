package sim

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Cluster is the simulator as a harness for scenario tests: the members, network, event queue
// and invariant checker of Run (S1-S5 after every event), without Run's fault schedule,
// ledger model and liveness phases. The test is the scenario: it crashes, restarts, cuts off,
// stops and resumes members, sets ledgers, asks for transfers, and advances virtual time.
//
// Every message takes exactly ClusterOptions.OneWay each way (no jitter, loss or
// duplication), and every member passes on one grid of MaintainInterval (a restarted member
// joins it), so a scenario is exact and easy to reason about. Like Run, a Cluster belongs to
// one goroutine and replays bit for bit.
type Cluster struct{ s *sim }

// ClusterOptions describe a Cluster. The zero value of every field but Config has a default.
type ClusterOptions struct {
	Seed    uint64 // the members' random re-vote delays derive from it
	Members int    // MinMembers..MaxMembers; 0 means 3
	// Config is every member's election config, used as given (dledger.New validates it).
	Config     dledger.Config
	OneWay     time.Duration // every message's delay; 0 means 1 ms
	RPCTimeout time.Duration // a call without an answer fails this long after the send; 0 means DefaultRPCTimeout
	// LedgerFromStorage starts every member with dledger.Options.LedgerFromStorage: a member
	// abstains until its ledger is reported (at once on a start, but see RestartUnreported).
	LedgerFromStorage bool
	Trace             io.Writer // receives every trace line, as Options.Trace
}

// harness is a Cluster's part of a run.
type harness struct {
	ledgerFromStorage bool
	events            [][]dledger.RoleEvent // per member: role events not yet taken by Events
}

// fromStorage says whether members start with dledger.Options.LedgerFromStorage (false in Run).
func (h *harness) fromStorage() bool { return h != nil && h.ledgerFromStorage }

// keep stores a role event the checker has seen, for Cluster.Events (nothing in Run).
func (h *harness) keep(m *member, ev dledger.RoleEvent) {
	if h != nil {
		h.events[m.idx] = append(h.events[m.idx], ev)
	}
}

// NewCluster starts a group: every member up at virtual time zero, with an empty ledger.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	if o.Members == 0 {
		o.Members = MinMembers
	}
	if o.Members < MinMembers || o.Members > MaxMembers {
		return nil, fmt.Errorf("members must be %d..%d (got %d)", MinMembers, MaxMembers, o.Members)
	}
	if o.OneWay < 0 || o.RPCTimeout < 0 {
		return nil, fmt.Errorf("one-way delay and rpc timeout must not be negative")
	}
	if o.OneWay == 0 {
		o.OneWay = time.Millisecond
	}
	if o.RPCTimeout == 0 {
		o.RPCTimeout = DefaultRPCTimeout
	}
	s := newGroup(Options{Seed: o.Seed, Members: o.Members, RPCTimeout: o.RPCTimeout, Trace: o.Trace}, o.Config)
	s.harness = &harness{ledgerFromStorage: o.LedgerFromStorage, events: make([][]dledger.RoleEvent, o.Members)}
	s.net.p = linkParams{delayMin: o.OneWay}
	for _, m := range s.members {
		if err := s.startMember(m); err != nil {
			return nil, err
		}
	}
	s.check()
	return &Cluster{s: s}, s.err()
}

// err is the run's violation as an error, or nil.
func (s *sim) err() error {
	if s.violation == nil {
		return nil
	}
	return s.violation
}

// Err is the first invariant the group broke (a *Violation), or nil.
func (c *Cluster) Err() error { return c.s.err() }

// Run advances virtual time by d, running every event due until then (those at exactly now+d
// included), and returns Err. Once an invariant is broken, time stops there.
func (c *Cluster) Run(d time.Duration) error {
	s := c.s
	end := s.now + d
	for s.violation == nil && s.q.len() > 0 && s.q.h[0].at <= end {
		s.step()
	}
	if s.violation == nil {
		s.now = end
	}
	return s.err()
}

// Now is the virtual time since the cluster started.
func (c *Cluster) Now() time.Duration { return c.s.now }

// IDs are the members' ids, n0, n1, ...
func (c *Cluster) IDs() []string { return append([]string(nil), c.s.tr.ids...) }

// m is the member id; an unknown id is a bug in the test.
func (c *Cluster) m(id string) *member {
	if m := c.s.member(id); m != nil {
		return m
	}
	panic(fmt.Sprintf("sim: no member %q in the cluster", id))
}

// Up says whether the member is running (stopped members are running).
func (c *Cluster) Up(id string) bool { return c.m(id).up }

// Status is the member's elector status; a member that is down reports only its SelfID.
func (c *Cluster) Status(id string) dledger.Status {
	m := c.m(id)
	if !m.up {
		return dledger.Status{SelfID: id}
	}
	return m.e.Status()
}

// Events returns the role events the member has delivered since the last call (the checker
// sees them first), across restarts.
func (c *Cluster) Events(id string) []dledger.RoleEvent {
	m := c.m(id)
	evs := c.s.harness.events[m.idx]
	c.s.harness.events[m.idx] = nil
	return evs
}

// Store is the member's vote store, which outlives its crashes.
func (c *Cluster) Store(id string) *memberstate.MemStore { return c.m(id).store }

// Crash kills the member (kill -9): its elector and whatever waited for it are gone; its
// store and ledger survive.
func (c *Cluster) Crash(id string) {
	c.s.crash(c.m(id))
	c.s.check()
}

// Restart starts a crashed member again over its store, and reports its ledger.
func (c *Cluster) Restart(id string) {
	c.restart(id, false)
}

func (c *Cluster) restart(id string, unreported bool) {
	m := c.m(id)
	if m.up {
		return
	}
	m.unreported = unreported
	c.s.restart(m)
	c.s.check()
}

// RestartUnreported restarts a crashed member whose storage has not reported its ledger yet
// (a sidecar's application has not called PUT /v1/ledger); Report ends that.
func (c *Cluster) RestartUnreported(id string) { c.restart(id, true) }

// Report tells the member's elector its ledger, as its storage does.
func (c *Cluster) Report(id string) {
	m := c.m(id)
	m.unreported = false
	c.s.setLedger(m, m.ledger)
	c.s.check()
}

// Ledger is the member's true ledger end (its storage's, reported or not).
func (c *Cluster) Ledger(id string) memberstate.LedgerEnd { return c.m(id).ledger }

// SetLedger changes the member's ledger end and reports it to its elector, unless the member
// is down or restarted unreported (then it only changes the storage's value).
func (c *Cluster) SetLedger(id string, l memberstate.LedgerEnd) {
	c.s.setLedger(c.m(id), l)
	c.s.check()
}

// Cut drops (cut) or delivers again (!cut) every message on the directed link from -> to.
func (c *Cluster) Cut(from, to string, cut bool) {
	a, b := c.m(from), c.m(to)
	if cut {
		c.s.cutLink(a, b)
		return
	}
	if c.s.net.cut[a.idx][b.idx] {
		c.s.net.cut[a.idx][b.idx] = false
		c.s.note("link %s->%s mended", from, to)
		if a.up && b.up && !c.s.net.cut[b.idx][a.idx] { // both ways open again: they reconnect
			c.s.connectLater(a, b)
			c.s.connectLater(b, a)
		}
	}
}

// Isolate cuts (or mends) every link to and from the member.
func (c *Cluster) Isolate(id string, cut bool) {
	for _, o := range c.s.tr.ids {
		if o != id {
			c.Cut(id, o, cut)
			c.Cut(o, id, cut)
		}
	}
}

// Stop freezes the member's process (SIGSTOP): no passes; what reaches it (requests,
// answers, timeouts) waits until Resume.
func (c *Cluster) Stop(id string) { c.s.stop(c.m(id)) }

// Resume continues a stopped member (SIGCONT). With passFirst its first pass runs before it
// reads what reached it while stopped, else after; a real process does either.
func (c *Cluster) Resume(id string, passFirst bool) { c.s.resume(c.m(id), passFirst) }

// TransferLeadership asks member from, as an admin would, to hand leadership to member to;
// done receives the answer (from a later event, or at once).
func (c *Cluster) TransferLeadership(from, to string, done func(*protocol.LeadershipTransferResponse)) {
	m := c.m(from)
	if !m.up {
		panic(fmt.Sprintf("sim: TransferLeadership on %s, which is down", from))
	}
	c.s.touch(m)
	m.e.TransferLeadership(to, -1, done)
	c.s.check()
}

// Describe is one line per member: up, role, term, leader, vote, ledger.
func (c *Cluster) Describe() string {
	var b strings.Builder
	for _, m := range c.s.members {
		if !m.up {
			fmt.Fprintf(&b, "[%s down ledger=(%d,%d)] ", m.id, m.ledger.Term, m.ledger.Index)
			continue
		}
		st := m.e.Status()
		fmt.Fprintf(&b, "[%s %v term=%d leader=%q vote=%q ledger=(%d,%d) stopped=%v] ", m.id, st.Role, st.Term,
			st.LeaderID, st.VoteFor, m.ledger.Term, m.ledger.Index, m.stopped)
	}
	return strings.TrimSpace(b.String())
}
