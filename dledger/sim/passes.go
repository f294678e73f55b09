package sim

import (
	"fmt"
	"reflect"

	"github.com/dledger-go/dledger/dledger"
)

// The PASS oracle (docs/protocol.md section 9, P1): a pass run before the time NextPassAt
// named sends nothing and changes no status. The driver sleeps until that time, so a deadline
// some part of the elector acts on but leaves out of NextPassAt (dledger/schedule.go) is
// silently deferred, by up to a detection window, and no other check would notice: the pass
// that acts on it still comes, only late. After every event, each member whose elector ran in
// it and whose planned pass is still ahead runs one extra pass, now, and must come out of it
// unchanged. The forget-deadline bug (broken.go) shows the oracle fails.
//
// The extra pass leaves the run as it was: a pass with nothing due draws no random number,
// writes no trace record and sends nothing, and the planned pass stays where the event's own
// entry point put it (the elector re-plans at the end of every entry point that changed
// something, from the same state and the same instant; a pass leaves the plan to the driver's
// NextPassAt, which the simulator asks for after every pass but this one). Its only trace is the elector's time of the last pass, which
// nothing decides by once a pass has been planned (passDue). So every seed's trace hash is the
// same with the oracle as without it.

// probePass runs m's early pass and checks it, if m is running, not stopped, and its elector
// has planned a pass later than now.
func (s *sim) probePass(m *member) {
	if !m.up || m.stopped || !m.planned || s.now >= m.plannedAt || s.violation != nil {
		return
	}
	before := m.e.Status()
	s.probing = true
	m.e.Tick()
	s.probing = false
	if s.violation != nil {
		return // it sent something (newCall)
	}
	if after := m.e.Status(); !sameStatus(before, after) {
		s.fail("PASS", "%s: a pass at %v, before the pass its elector planned (%v), changed its status:%s",
			m.id, s.now, m.plannedAt, statusDiff(before, after))
	}
}

// sameStatus compares two snapshots of one member field by field (reflect.DeepEqual, the
// obvious way, made the oracle cost more than the rest of the run).
func sameStatus(a, b dledger.Status) bool {
	return sameElection(a, b) && a.TakingLeadership == b.TakingLeadership &&
		a.TransferringTo == b.TransferringTo && samePeers(a.Peers, b.Peers)
}

// sameElection compares what the vote and heartbeat tables decide.
func sameElection(a, b dledger.Status) bool {
	return a.Role == b.Role && a.Term == b.Term && a.LeaderID == b.LeaderID && a.VoteFor == b.VoteFor &&
		a.Ledger == b.Ledger && a.LedgerKnown == b.LedgerKnown && a.KnownMaxTermInGroup == b.KnownMaxTermInGroup &&
		a.LastParseResult == b.LastParseResult && a.LastHeartBeat.Equal(b.LastHeartBeat)
}

// samePeers compares what a leader knows of each member.
func samePeers(a, b []dledger.PeerStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		p, q := a[i], b[i]
		if p.Alive != q.Alive || !p.LastAck.Equal(q.LastAck) || p.Ledger != q.Ledger || p.LedgerSet != q.LedgerSet {
			return false
		}
	}
	return true
}

// statusDiff names the fields of a Status that differ.
func statusDiff(a, b any) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	out := ""
	for i := 0; i < va.NumField(); i++ {
		if x, y := va.Field(i).Interface(), vb.Field(i).Interface(); !reflect.DeepEqual(x, y) {
			out += fmt.Sprintf(" %s %v -> %v;", va.Type().Field(i).Name, x, y)
		}
	}
	return out
}
