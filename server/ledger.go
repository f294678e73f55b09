package server

import "go.uber.org/zap"

// noteLedgerReport warns of, and counts, a ledger report that moves the end term above every
// term this member has seen (its current term, the highest term heard in the group). The
// report is accepted all the same (docs/protocol.md section 1, "A report ahead of every term", says why): a real ledger can be ahead
// of its member's election state, and refusing it would make the member vote as if its ledger
// were older than it is. A wrong one, though, makes this member the most up-to-date candidate
// and raises the group's term to the reported one at the next election; the warning names it.
// Only a report that changes the end term is checked: the term of a ledger's last entry changes
// once per leadership, while a storage may report every append.
func (s *Server) noteLedgerReport(endTerm, endIndex int64) {
	if s.lastReportTerm.Swap(endTerm) == endTerm {
		return
	}
	st := s.elector.Status()
	if endTerm <= max(st.Term, st.KnownMaxTermInGroup) {
		return
	}
	s.metrics.LedgerReportAhead()
	s.logAt(zap.WarnLevel).Warn("ledger report ahead of every term this member has seen: accepted; "+
		"if the group never reached this term, the reporter is wrong, and this member will win the next election with it",
		zap.Int64("endTerm", endTerm), zap.Int64("endIndex", endIndex), zap.Int64("term", st.Term),
		zap.Int64("knownMaxTermInGroup", st.KnownMaxTermInGroup))
}
