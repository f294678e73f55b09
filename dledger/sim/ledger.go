package sim

import (
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// ledgerStep models the storage the elector is embedded in, plausibly: only a member that is
// leader appends, at its own term (so no ledger term ever exceeds a term some leader has had),
// and a follower copies its leader's ledger end, but only while both are at the same term and
// the link works both ways, and not while it is marked lagging. A stale leader may still
// append locally (a real one writes before it learns it was deposed); a crash keeps the
// ledger. It runs a few times per heartbeat interval.
func (s *sim) ledgerStep() {
	if !s.appendStep() {
		return // the model broke a rule of its own (SIM)
	}
	s.copyStep()
	hb := int64(s.cfg.HeartBeatInterval)
	s.at(time.Duration(hb/8+s.rngLedger.Int64N(hb*3/8)), s.ledgerStep)
}

// appendStep: each member that is leader appends, with probability 0.6, one to three entries at
// its term. False when a leader's term is above every term a leader has had (a model bug).
func (s *sim) appendStep() bool {
	for _, m := range s.members {
		if !m.up || m.ms.Role() != protocol.LEADER || s.rngLedger.Float64() >= 0.6 {
			continue
		}
		term := m.ms.CurrTerm()
		if term > s.chk.maxLeaderTerm {
			s.fail("SIM", "ledger model: %s would append at term %d, above any leader's term %d", m.id, term, s.chk.maxLeaderTerm)
			return false
		}
		l := memberstate.LedgerEnd{Term: term, Index: m.ledger.Index + 1 + s.rngLedger.Int64N(3)}
		if l.Index > protocol.MaxLedgerValue {
			continue // the log is full (only near-ceiling runs get here)
		}
		s.setLedger(m, l)
		s.tr.add(record{at: s.now, kind: rAppend, a: int8(m.idx), b: -1, term: l.Term, x: l.Index})
	}
	return true
}

// copyStep: each follower that is not lagging copies, with probability 0.7, its leader's
// ledger end, if that leader leads at the follower's term over a link that works both ways.
func (s *sim) copyStep() {
	for _, f := range s.members {
		if !f.up || f.lagging || f.ms.Role() != protocol.FOLLOWER {
			continue
		}
		l := s.member(f.ms.LeaderID())
		if !s.canCopy(f, l) || s.rngLedger.Float64() >= 0.7 {
			continue
		}
		s.setLedger(f, l.ledger)
		s.tr.add(record{at: s.now, kind: rCopy, a: int8(f.idx), b: int8(l.idx), term: l.ledger.Term, x: l.ledger.Index})
	}
}

// canCopy: follower f can copy l's ledger now (l leads at f's term, the link works both ways,
// and there is something new).
func (s *sim) canCopy(f, l *member) bool {
	return l != nil && l.up && l.ms.Role() == protocol.LEADER && l.ms.CurrTerm() == f.ms.CurrTerm() &&
		!s.net.cut[l.idx][f.idx] && !s.net.cut[f.idx][l.idx] && l.ledger != f.ledger
}
