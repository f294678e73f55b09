package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Extreme names how far up a run's terms and ledger values start.
type Extreme string

const (
	// ExtremeNone: every member starts at term 0 with an empty ledger.
	ExtremeNone Extreme = ""
	// ExtremeNearCeiling: persisted terms a few thousand below protocol.MaxTerm, ledger terms
	// just below them and ledger indexes a few thousand below protocol.MaxLedgerValue (appends
	// stop at it, as a full log would). A run moves the term up by tens at most (a 1000-seed
	// campaign's largest is under 100), so the ceiling is never reached and L1 is checked as
	// in any run: big values change nothing.
	ExtremeNearCeiling Extreme = "near-ceiling"
	// ExtremeAtCeiling: persisted terms within a few of protocol.MaxTerm, so the run reaches it.
	// A member at MaxTerm cannot start a new term: once every member has voted at MaxTerm and
	// its leader is gone, no leader can ever be elected. That loss of liveness is by design
	// (the alternative is a term that wraps, and S1-S3 with it), so an L1 failure is not
	// reported once a member has reached MaxTerm: the run ends there, with S1-S5 checked all
	// along. Chaos scenario only.
	ExtremeAtCeiling Extreme = "at-ceiling"
)

// ceilingMargin is how far below the ceilings a near-ceiling run starts.
const ceilingMargin = 4000

// chooseStart picks the run's starting terms and ledgers, and whether its members are
// sidecars, from streams of their own (a plain run's schedule is as it was): one run in eight
// starts near the term ceiling and, in chaos runs, one in eight at it; half the runs are
// sidecar runs.
func (s *sim) chooseStart(extremeStream, sidecarStream uint64) {
	r := s.stream(extremeStream)
	switch k := r.IntN(8); {
	case k == 0:
		s.extreme = ExtremeNearCeiling
	case k == 1 && s.opt.Scenario == ScenarioChaos:
		s.extreme = ExtremeAtCeiling
	}
	s.sidecar = s.stream(sidecarStream).IntN(2) == 0
	if s.extreme == ExtremeNone {
		return
	}
	base := protocol.MaxTerm - ceilingMargin - r.Int64N(ceilingMargin)
	if s.extreme == ExtremeAtCeiling {
		base = protocol.MaxTerm - r.Int64N(8)
	}
	top := protocol.MaxLedgerValue - r.Int64N(ceilingMargin)
	for _, m := range s.members {
		term := base - r.Int64N(3)
		if err := m.store.Save(memberstate.Durable{Term: term}); err != nil {
			panic(err) // a fresh MemStore takes any term in bounds
		}
		// Ledgers from an earlier leader at a lower term; they differ, so S4 has work to do.
		m.ledger = memberstate.LedgerEnd{Term: base - 3, Index: top - r.Int64N(20)}
	}
	s.startTerm = base - 2
	s.tr.add(record{at: 0, kind: rPhase, a: -1, b: -1, note: fmt.Sprintf("extreme start %s: terms from %d, ledgers (%d, ~%d)",
		s.extreme, base-2, base-3, top)})
}

// ceilingReached says whether any member has reached protocol.MaxTerm.
func (s *sim) ceilingReached() bool { return s.chk.maxTermSeen() >= protocol.MaxTerm }

// reportLater is the sidecar-restart fault: a restarted sidecar member comes back without its
// ledger (a kill -9 loses the elector's copy; the application reports it again with PUT
// /v1/ledger only after a while). Its elector runs with Options.LedgerFromStorage, so it abstains
// until the report; the true ledger (m.ledger, kept by the storage) is what S4 checks against.
// A report is delayed by up to one detection window.
func (s *sim) reportLater(m *member) {
	m.unreported = true
	inc := m.inc
	s.at(between(s.rngSidecar, 0, s.cfg.DetectionWindow()), func() {
		if !m.up || m.inc != inc || !m.unreported {
			return
		}
		m.unreported = false
		s.touch(m)
		if err := m.e.UpdateLedger(m.ledger.Term, m.ledger.Index); err != nil {
			s.fail("SIM", "UpdateLedger(%d, %d) on %s: %v", m.ledger.Term, m.ledger.Index, m.id, err)
			return
		}
		s.tr.add(record{at: s.now, kind: rNote, a: int8(m.idx), b: -1, term: m.ledger.Term, x: m.ledger.Index,
			note: fmt.Sprintf("%s's storage reports ledger (%d,%d)", m.id, m.ledger.Term, m.ledger.Index)})
	})
}

// startDelays is when each member's process starts, from a stream of its own: at once in three
// runs out of four; in the fourth, as processes started together really do, each after a random
// delay of up to a third of a detection window, so members of the start-up order come up late
// or early and the first of them retries as the others connect (Elector.PeerReachable). The
// faults begin once every member has started.
func (s *sim) startDelays() []time.Duration {
	d := make([]time.Duration, len(s.members))
	r := s.stream(11)
	if r.IntN(4) != 0 {
		return d
	}
	s.staggered = true
	var parts []string
	for i := range d {
		d[i] = time.Duration(r.Int64N(int64(s.cfg.DetectionWindow() / 3)))
		parts = append(parts, fmt.Sprintf("%s +%v", s.members[i].id, d[i].Round(time.Millisecond)))
	}
	s.tr.add(record{at: 0, kind: rPhase, a: -1, b: -1, note: "staggered start: " + strings.Join(parts, ", ")})
	return d
}
