package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
)

// Reconfigurations (Options.Reconfig, docs/protocol.md 13.8). A run with them has spare
// members beyond the initial configuration, started with dledger.Member.Join, and the leader
// is asked to add, promote and remove members during the fault phases (crashes, pauses,
// partitions, restarts mid-change) and in the calm after each heal. Their draws come from a
// stream of their own, so a run without reconfigurations replays as it always did.
//
// Checked besides S1-S5, after every event, from outside the electors:
//
//	S6  a new leader was granted by a majority of the voters of its committed configuration;
//	    that configuration is the newest committed anywhere or the one before it; and the
//	    voters that granted it share a member with every majority of the configuration
//	    committed before its own.
//	S7  at most one configuration is committed per epoch; each differs from the committed one
//	    before it by at most one voter; and when a configuration is first seen committed, a
//	    majority of the voters of the one before it hold it (or a later one) in their durable
//	    state (MemStore.LoadConfig), the commit rule of 13.3.

// reconfigSpares is how many members beyond the initial configuration a run with
// reconfigurations has.
const reconfigSpares = 2

// reconfigOn: this run changes its configuration (the chaos scenario of a single group; the
// rejoin scenario counts every leader change, and a Cluster's tests drive their own).
func (s *sim) reconfigOn() bool {
	return s.opt.Reconfig && s.opt.Scenario == ScenarioChaos && s.hr == nil && s.harness == nil
}

// spare: m is not in the initial configuration (it joins).
func (s *sim) spare(m *member) bool { return m.idx >= s.opt.Members }

// memberOf is what m starts as: an initial member, or a spare that joins, its peers the
// initial members and itself.
func (s *sim) memberOf(m *member) dledger.Member {
	who := dledger.Member{Group: s.groupName(), SelfID: m.id, Peers: s.peers, Store: memberStore{m.store, s, m}}
	if s.spare(m) {
		who.Peers = append(slices.Clone(s.peers), memberstate.Peer{ID: m.id, Addr: spareAddr(m.idx)})
		who.Join = true
	}
	return who
}

func spareAddr(i int) string { return fmt.Sprintf("10.0.0.%d:20911", i+1) }

// planChanges asks for 0-2 changes at random times within a fault phase of length, and in
// half the phases pauses a member (the leader, when there is one at that moment, in half of
// those) for a while: a process stopped mid-change, as SIGSTOP or a long GC pause would.
func (s *sim) planChanges(length time.Duration) {
	r := s.rngReconf
	for range r.IntN(3) {
		s.inPhase(between(r, 0, length), s.reconfigure)
	}
	if r.IntN(2) == 0 {
		at, d, leader := between(r, 0, length), between(r, s.cfg.DetectionWindow()/4, 2*s.cfg.DetectionWindow()), r.IntN(2) == 0
		m := s.members[r.IntN(len(s.members))]
		s.inPhase(at, func() {
			if l := s.leader(); leader && l != nil {
				m = l
			}
			s.pause(m, d)
		})
	}
}

// pause stops m (it makes no pass, and what reaches it waits) for d, or until the heal.
func (s *sim) pause(m *member, d time.Duration) {
	if !m.up || m.stopped {
		return
	}
	m.stopped = true
	m.stops++
	s.note("%s paused for %v", m.id, d)
	s.inPhase(d, func() { s.resume(m, false) }) // resume: detect.go
}

// resumeAll ends every pause (a heal).
func (s *sim) resumeAll() {
	for _, m := range s.members {
		s.resume(m, false)
	}
}

// reconfigure asks the current leader (the one of the highest term, if several believe they
// lead) for one change drawn from its configuration.
func (s *sim) reconfigure() {
	l := s.leader()
	if l == nil || l.stopped { // a paused process serves no admin request
		return
	}
	c, ok := s.pickChange(l, l.e.Membership(), s.rngReconf)
	if !ok {
		return
	}
	s.note("reconfig: %s asked to %s %s", l.id, c.Kind, c.ID)
	s.touch(l)
	l.e.ChangeMembership(c, func(res dledger.ChangeResult) {
		what := "committed"
		if res.Err != nil {
			what = res.Err.Error()
		}
		s.note("reconfig: %s %s: %s (epoch %d)", c.Kind, c.ID, what, res.Config.Epoch)
	})
}

// pickChange draws a change: add a member the configurations do not have, promote a
// non-voter (up to 5 voters), remove a member other than the leader (down to 2 voters), and
// once in a while remove the leader itself (it hands over first).
func (s *sim) pickChange(l *member, st dledger.MembershipStatus, r *rand.Rand) (dledger.Change, bool) {
	adds, promotes, removes := s.changeTargets(l, st)
	switch k := r.IntN(10); {
	case k < 3 && len(adds) > 0:
		id := adds[r.IntN(len(adds))]
		return dledger.Change{Kind: dledger.AddNonVoter, ID: id, Addr: s.addrOf(id)}, true
	case k < 6 && len(promotes) > 0:
		return dledger.Change{Kind: dledger.Promote, ID: promotes[r.IntN(len(promotes))]}, true
	case k < 9 && len(removes) > 0:
		return dledger.Change{Kind: dledger.Remove, ID: removes[r.IntN(len(removes))]}, true
	case k == 9:
		return dledger.Change{Kind: dledger.Remove, ID: l.id}, true
	}
	return dledger.Change{}, false
}

// changeTargets lists, in member order, the members that could be added, promoted (up to 5
// voters) and removed (the leader aside, down to 2 voters) from configuration st.
func (s *sim) changeTargets(l *member, st dledger.MembershipStatus) (adds, promotes, removes []string) {
	in := func(id string) bool {
		return hasID(st.Voters, id) || hasID(st.NonVoters, id) || (st.Pending != nil && st.Pending.IsMember(id))
	}
	for _, m := range s.members {
		switch {
		case !in(m.id):
			adds = append(adds, m.id)
		case hasID(st.NonVoters, m.id):
			promotes = append(promotes, m.id)
			removes = append(removes, m.id)
		case m != l && len(st.Voters) > 2:
			removes = append(removes, m.id)
		}
	}
	if len(st.Voters) >= 5 {
		promotes = nil
	}
	return adds, promotes, removes
}

func hasID(ps []memberstate.Peer, id string) bool {
	return slices.ContainsFunc(ps, func(p memberstate.Peer) bool { return p.ID == id })
}

func (s *sim) addrOf(id string) string {
	for _, p := range s.peers {
		if p.ID == id {
			return p.Addr
		}
	}
	return spareAddr(s.member(id).idx)
}

// ---- the checker's side (S6, S7) ----

// confCheck is what S6 and S7 remember: the configuration committed at each epoch (content
// only: a re-proposal at a later term has the same members), and the newest epoch committed
// anywhere.
type confCheck struct {
	committed map[uint64]dledger.Configuration
	newest    uint64
}

// observeConfig checks S7 for what member m holds committed.
func (c *checker) observeConfig(m *member) {
	if !c.s.reconfigOn() {
		return
	}
	cc := &c.conf
	if cc.committed == nil {
		cc.committed = map[uint64]dledger.Configuration{0: {Voters: c.s.peers}}
	}
	st := m.e.Membership()
	if st.Joining {
		return
	}
	cur := dledger.Configuration{Epoch: st.Epoch, Term: st.ConfTerm, Voters: st.Voters, NonVoters: st.NonVoters}
	if seen, ok := cc.committed[st.Epoch]; ok {
		if !sameMembers(seen, cur) {
			c.s.fail("S7", "two configurations committed at epoch %d: %s, and %s held by %s", st.Epoch, seen, cur, m.id)
		}
		return
	}
	prev, ok := cc.committed[st.Epoch-1]
	switch {
	case !ok: // a member learned a configuration whose predecessor nobody was seen to hold
	case voterChanges(prev, cur) > 1:
		c.s.fail("S7", "%s, held by %s, changes %d voters of %s", cur, m.id, voterChanges(prev, cur), prev)
		return
	default:
		if n, need := c.storedBy(prev, cur), memberstate.QuorumSize(len(prev.Voters)); n < need {
			c.s.fail("S7", "%s committed epoch %d with %d of the %d voters of epoch %d storing it; a majority is %d",
				m.id, st.Epoch, n, len(prev.Voters), st.Epoch-1, need)
			return
		}
	}
	cc.committed[st.Epoch] = cur
	cc.newest = max(cc.newest, st.Epoch)
	c.s.note("configuration %s first seen committed, at %s", cur, m.id)
}

// storedBy counts the voters of prev whose durable state holds cur's version or a later one.
func (c *checker) storedBy(prev, cur dledger.Configuration) int {
	n := 0
	for _, v := range prev.Voters {
		m := c.s.member(v.ID)
		if m == nil {
			continue
		}
		d, ok, err := m.store.LoadConfig()
		if err != nil || !ok {
			continue
		}
		hi := d.Committed
		if d.Pending != nil {
			hi = *d.Pending
		}
		if hi.Epoch > cur.Epoch || (hi.Epoch == cur.Epoch && hi.Term >= cur.Term) || d.Committed.Epoch >= cur.Epoch {
			n++
		}
	}
	return n
}

// checkElection is S6 for m, elected at term with the grants the checker recorded; it
// returns false after reporting a violation. It replaces S4's fixed quorum in a run with
// reconfigurations: the quorum is that of m's committed configuration.
func (c *checker) checkElection(m *member, term int64, granted func(v *member) bool) bool {
	st := m.e.Membership()
	cfg := dledger.Configuration{Epoch: st.Epoch, Voters: st.Voters}
	var by []string
	for _, v := range st.Voters {
		if vm := c.s.member(v.ID); vm != nil && granted(vm) {
			by = append(by, v.ID)
		}
	}
	if need := memberstate.QuorumSize(len(cfg.Voters)); len(by) < need {
		c.s.fail("S6", "%s became leader of term %d with grants from %v, not a majority (%d) of the voters of its epoch %d (%s)",
			m.id, term, by, need, st.Epoch, cfg)
		return false
	}
	if st.Epoch+1 < c.conf.newest {
		c.s.fail("S6", "%s became leader of term %d with the configuration of epoch %d, while epoch %d is committed",
			m.id, term, st.Epoch, c.conf.newest)
		return false
	}
	if prev, ok := c.conf.committed[st.Epoch-1]; ok && st.Epoch > 0 {
		inPrev := 0
		for _, id := range by {
			if hasID(prev.Voters, id) {
				inPrev++
			}
		}
		// by meets every majority of prev iff the members of prev outside it are no majority.
		if len(prev.Voters)-inPrev >= memberstate.QuorumSize(len(prev.Voters)) {
			c.s.fail("S6", "%s became leader of term %d granted by %v, disjoint from a majority of the voters of epoch %d (%s)",
				m.id, term, by, st.Epoch-1, prev)
			return false
		}
	}
	return true
}

// sameMembers: a and b have the same voters and non-voters.
func sameMembers(a, b dledger.Configuration) bool {
	return sameIDs(a.Voters, b.Voters) && sameIDs(a.NonVoters, b.NonVoters)
}

func sameIDs(a, b []memberstate.Peer) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !hasID(b, p.ID) {
			return false
		}
	}
	return true
}

// voterChanges is the number of voters in one of a and b and not the other.
func voterChanges(a, b dledger.Configuration) int {
	n := 0
	for _, p := range a.Voters {
		if !hasID(b.Voters, p.ID) {
			n++
		}
	}
	for _, p := range b.Voters {
		if !hasID(a.Voters, p.ID) {
			n++
		}
	}
	return n
}

// countsIn says which followers count towards leader l's quorum, and how many it needs: every
// member and the run's fixed quorum, or with reconfigurations the voters of l's committed
// configuration (l itself counts once, and is a voter of it).
func (s *sim) countsIn(l *member) (func(*member) bool, int) {
	if !s.reconfigOn() {
		return func(*member) bool { return true }, s.quorum
	}
	st := l.e.Membership()
	return func(f *member) bool { return hasID(st.Voters, f.id) }, memberstate.QuorumSize(len(st.Voters))
}
