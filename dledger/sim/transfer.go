package sim

import (
	"fmt"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// L3Bound is the longest an admin may wait for the answer to a leadership transfer (SPEC 9,
// L3): the leader's own deadline, TransferBound (the transferee's catch-up wait, its campaign
// budget and one vote round of slack), plus two StateMaintainer passes, because the deadline
// is noticed by a pass.
func L3Bound(cfg dledger.Config) time.Duration {
	return cfg.TransferBound() + 2*cfg.MaintainInterval
}

// transfer asks the current leader, as an admin would, to hand leadership to a random member
// (possibly itself, a crashed one or a lagging one: every request must be answered). The
// answer must come within L3Bound unless the leader crashes first (its caller is gone then).
//
// TODO(L3): the second half of L3, "never leaves a member stuck as a candidate with an
// inflated term", is covered only indirectly, by L1 at every heal: the group must still elect
// a stable leader within L1Bound.
func (s *sim) transfer() {
	l := s.leader()
	if l == nil {
		return
	}
	to := s.members[s.rngFault.IntN(len(s.members))]
	inc, began := l.inc, s.now
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
		if s.now-began > bound {
			s.fail("L3", "the transfer %s->%s was answered after %v, above the bound %v", l.id, to.id, s.now-began, bound)
		}
	})
	s.at(bound, func() {
		if !answered && l.up && l.inc == inc {
			s.fail("L3", "the transfer %s->%s asked at %v got no answer within %v", l.id, to.id, began, bound)
		}
	})
}
