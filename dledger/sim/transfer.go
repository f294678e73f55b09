package sim

import (
	"fmt"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// L3Bound is the longest an admin may wait for the answer to a leadership transfer (docs/protocol.md
// section 9, L3): the leader's own deadline, TransferBound (the transferee's catch-up wait, its campaign
// budget and one vote round of slack), plus two StateMaintainer passes, because the deadline
// is noticed by a pass.
func L3Bound(cfg dledger.Config) time.Duration {
	return cfg.TransferBound() + 2*cfg.MaintainInterval
}

// transfer asks the current leader, as an admin would, to hand leadership to a random member
// (possibly itself, a crashed one or a lagging one: every request must be answered). The
// answer must come within L3Bound unless the leader crashes first (its caller is gone then)
// or is stopped meanwhile (a frozen process answers late; hosts.go stops hosts).
// The other half of L3, that no transferee is left taking leadership, is takeEnded.
func (s *sim) transfer() {
	l := s.leader()
	if l == nil || l.stopped { // a paused process serves no admin request (reconfig.go pauses)
		return
	}
	to := s.members[s.rngFault.IntN(len(s.members))]
	inc, stops, began := l.inc, l.stops, s.now
	bound := L3Bound(s.cfg)
	answered := false
	s.tr.add(record{at: s.now, kind: rNote, a: int8(l.idx), b: int8(to.idx), note: fmt.Sprintf("admin asks %s to transfer leadership to %s", l.id, to.id)})
	s.touch(l)
	l.e.TransferLeadership(to.id, -1, func(resp *protocol.LeadershipTransferResponse) {
		if answered {
			s.fail("L3", "the transfer %s->%s asked at %v was answered twice", l.id, to.id, began)
			return
		}
		answered = true
		s.tr.add(record{at: s.now, kind: rNote, a: int8(l.idx), b: int8(to.idx),
			note: fmt.Sprintf("transfer %s->%s answered %v (term %d) after %v", l.id, to.id, resp.Code, resp.Term, s.now-began)})
		if s.now-began > bound && l.stops == stops {
			s.fail("L3", "the transfer %s->%s was answered after %v, above the bound %v", l.id, to.id, s.now-began, bound)
		}
	})
	s.at(bound, func() {
		if !answered && l.up && l.inc == inc && l.stops == stops {
			s.fail("L3", "the transfer %s->%s asked at %v got no answer within %v", l.id, to.id, began, bound)
		}
	})
}

// transferDelivered is called when a leadership-transfer request reaches its transferee m, and
// schedules the second half of L3: L3Bound later, m must no longer be taking leadership.
func (s *sim) transferDelivered(m *member) {
	m.takeReqs++
	n, inc, stops := m.takeReqs, m.inc, m.stops
	s.at(L3Bound(s.cfg), func() {
		if m.stops == stops { // a member stopped meanwhile is late, not stuck
			s.takeEnded(m, n, inc)
		}
	})
}

// takeEnded checks that the transfer request number n, delivered to m in incarnation inc, left
// no take running. A take begins only when a request arrives, and the transferee ends it within
// its catch-up wait plus its campaign budget (each noticed by a pass), which L3Bound exceeds by
// a vote round; so if no later request reached m (a later one gets its own check, from its own
// arrival: a delayed or repeated request may start a new take legitimately), a take still
// running now is stuck. A restart ends a take (the incarnation check), so does a role change
// (elected, following another leader, a higher term).
//
// Not checked: that a transferee whose take failed has not "inflated" the group's term. A
// failed take leaves it an ordinary candidate one term above the leader, by design (it had to
// adopt the new term to campaign). It then deposes that leader (its heartbeat answer is
// EXPIRED_TERM, docs/protocol.md 7.5 rule 1) and the group elects again at the higher term, which L1 bounds
// at every heal. Nor can a heal check that no candidate sits above the stable leader's term:
// when a quorum first follows a leader, a member outside that quorum may legitimately be a
// candidate at a higher term (it lost a split round and moved on, or stepped up on a
// higher-term request), and it is about to cause an election, not stuck; such a check would
// report healthy runs.
func (s *sim) takeEnded(m *member, n uint64, inc int) {
	if !m.up || m.inc != inc || m.takeReqs != n {
		return
	}
	if st := m.e.Status(); st.TakingLeadership {
		s.fail("L3", "%s is still taking leadership (%v at term %d) %v after a transfer request reached it",
			m.id, st.Role, st.Term, L3Bound(s.cfg))
	}
}
