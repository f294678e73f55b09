package sim

import (
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// checker holds what the safety invariants (docs/protocol.md section 9, S1-S5) need to remember. It observes the
// members from outside: role events, the answers HandleVote gives, and each MemberState's
// term and vote (read directly: the simulator's goroutine is the only one touching them).
// The maps are only looked up, never ranged over.
type checker struct {
	s       *sim
	leaders map[int64]int      // S1: term -> the member that led it
	grants  map[grantKey]grant // S2: (voter, term) -> the candidate it granted
	maxTerm []int64            // S3: the highest currTerm each member has had, across restarts
	evTerm  []int64            // S5: the last role-event term each member delivered, across restarts
	evSeq   []seqAt            // S5: the last role-event number, per incarnation (events come in order)
	seen    []observed         // the last (term, vote) read from each member, to skip unchanged ones
	// elections counts terms that had a leader; maxLeaderTerm is the highest of them (-1: none).
	elections     int
	maxLeaderTerm int64
	// conf: the configurations seen committed (S6, S7; reconfig.go).
	conf confCheck
}

type grantKey struct {
	voter int
	term  int64
}

// grant is one vote: for whom, and the voter's ledger when it granted (S4).
type grant struct {
	cand   int
	ledger memberstate.LedgerEnd
}

type seqAt struct {
	inc int
	seq uint64
}

type observed struct {
	term int64
	vote string
	inc  int
}

func newChecker(s *sim) checker {
	n := len(s.members)
	c := checker{s: s, leaders: map[int64]int{}, grants: map[grantKey]grant{},
		maxTerm: make([]int64, n), evTerm: make([]int64, n), evSeq: make([]seqAt, n), seen: make([]observed, n), maxLeaderTerm: -1}
	for i := range c.seen {
		c.seen[i].inc = -1
	}
	return c
}

// touch marks a member whose elector code runs in the current event: check looks at it.
// Every call into an elector goes through a touch, so nothing an elector does goes unchecked.
func (s *sim) touch(m *member) { s.touched |= 1 << m.idx }

// check runs after every event: the role events, term and vote of every member whose elector
// ran in it (the others cannot have changed).
func (s *sim) check() {
	for _, m := range s.members {
		if s.touched&(1<<m.idx) == 0 || !m.up || s.violation != nil {
			continue
		}
		s.chk.observe(m)
		s.chk.observeConfig(m)
		s.chk.takeEvents(m)
		s.windowCheck(m)
		s.probePass(m)
	}
	s.touched = 0
	if s.violation == nil {
		s.liveCheck()
	}
}

// observe checks S3 and records the member's durable vote (which covers its vote for itself:
// a candidate's self vote never crosses the network).
func (c *checker) observe(m *member) {
	term, vote := m.ms.CurrTerm(), m.ms.VoteFor()
	o := &c.seen[m.idx]
	if o.term == term && o.vote == vote && o.inc == m.inc {
		return
	}
	*o = observed{term: term, vote: vote, inc: m.inc}
	if term < c.maxTerm[m.idx] {
		c.s.fail("S3", "%s's currTerm went from %d down to %d", m.id, c.maxTerm[m.idx], term)
		return
	}
	c.maxTerm[m.idx] = term
	if vote != "" {
		if cand := c.s.member(vote); cand != nil {
			c.record(m, term, cand, m.ledger)
		}
	}
}

// voteGranted is called when HandleVote answered ACCEPT. voterLedger is the voter's true
// ledger (its storage's, which may not have been reported to its elector yet) just before the
// call (S4: it must not be newer than the candidate's).
func (c *checker) voteGranted(voter *member, req *protocol.VoteRequest, voterLedger memberstate.LedgerEnd) {
	cand := c.s.member(req.LeaderID)
	if cand == nil {
		c.s.fail("S2", "%s granted a vote to unknown member %q", voter.id, req.LeaderID)
		return
	}
	if reqLedger := ledgerOf(req); voterLedger.NewerThan(reqLedger) {
		c.s.fail("S4", "%s granted %s in term %d although its ledger (%d,%d) is newer than the candidate's (%d,%d)",
			voter.id, cand.id, req.Term, voterLedger.Term, voterLedger.Index, reqLedger.Term, reqLedger.Index)
		return
	}
	c.record(voter, req.Term, cand, voterLedger)
}

// record notes a vote (with the voter's true ledger) and checks S2: one candidate per (member, term), across crashes.
func (c *checker) record(voter *member, term int64, cand *member, ledger memberstate.LedgerEnd) {
	k := grantKey{voter.idx, term}
	if g, ok := c.grants[k]; ok {
		if g.cand != cand.idx {
			c.s.fail("S2", "%s granted two candidates in term %d: %s, then %s", voter.id, term, c.s.members[g.cand].id, cand.id)
		}
		return
	}
	c.grants[k] = grant{cand: cand.idx, ledger: ledger}
}

// takeEvents drains the member's role events and checks S5 (terms never decrease, events
// numbered in order), S1 (one leader per term) and the second half of S4 (a new leader holds
// a quorum of grants from voters whose ledger was not newer than its own).
func (c *checker) takeEvents(m *member) {
	for _, ev := range c.s.events(m) {
		leader := int8(-1)
		if l := c.s.member(ev.LeaderID); l != nil {
			leader = int8(l.idx)
		}
		c.s.tr.add(record{at: c.s.now, kind: rRole, a: int8(m.idx), b: -1, term: ev.Term, x: int64(ev.Role), y: int64(leader)})
		if ev.Term < c.evTerm[m.idx] {
			c.s.fail("S5", "%s delivered a role event at term %d after one at term %d (fencing token went backwards)",
				m.id, ev.Term, c.evTerm[m.idx])
			return
		}
		c.evTerm[m.idx] = ev.Term
		if last := &c.evSeq[m.idx]; last.inc == m.inc && ev.Seq != last.seq+1 {
			c.s.fail("S5", "%s delivered role event #%d after #%d (events out of order or lost)", m.id, ev.Seq, last.seq)
			return
		}
		c.evSeq[m.idx] = seqAt{inc: m.inc, seq: ev.Seq}
		c.s.harness.keep(m, ev)
		if ev.Role == protocol.LEADER {
			c.newLeader(m, ev.Term)
		}
	}
}

func (c *checker) newLeader(m *member, term int64) {
	if l, ok := c.leaders[term]; ok {
		if l != m.idx {
			c.s.fail("S1", "two leaders in term %d: %s and %s", term, c.s.members[l].id, m.id)
		}
		return
	}
	c.leaders[term] = m.idx
	c.elections++
	c.maxLeaderTerm = max(c.maxLeaderTerm, term)
	mine := m.ledger
	if c.s.reconfigOn() { // the quorum is its configuration's (S6, reconfig.go)
		c.checkElection(m, term, func(v *member) bool {
			g, ok := c.grants[grantKey{v.idx, term}]
			return ok && g.cand == m.idx && !g.ledger.NewerThan(mine)
		})
		return
	}
	votes := 0
	for _, v := range c.s.members {
		if g, ok := c.grants[grantKey{v.idx, term}]; ok && g.cand == m.idx && !g.ledger.NewerThan(mine) {
			votes++
		}
	}
	if votes < c.s.quorum {
		c.s.fail("S4", "%s became leader of term %d with %d grants from voters whose ledger was not newer than its (%d,%d); quorum is %d",
			m.id, term, votes, mine.Term, mine.Index, c.s.quorum)
	}
}

// maxTermSeen is the highest currTerm any member has reached.
func (c *checker) maxTermSeen() int64 {
	var t int64
	for _, v := range c.maxTerm {
		t = max(t, v)
	}
	return t
}
