package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// errDisk is what a failing vote store returns.
var errDisk = errors.New("sim: disk failure")

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// between returns a uniform duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// beginFault starts a fault phase of 1-4 detection windows: new network conditions, and 1-6
// fault actions at random times within the phase. A heal phase follows.
func (s *sim) beginFault() {
	s.phaseID++
	dw := s.cfg.DetectionWindow()
	length := between(s.rngFault, dw, 4*dw)
	s.net.p = s.randomParams()
	// Drawn from the disk stream, so that the rest of the fault schedule does not depend on it.
	s.tear = pick(s.rngDisk, 0, 0, 0.05, 0.2)
	s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: fmt.Sprintf("fault for %v: %v tear=%.2f", length, s.net.p, s.tear)})
	for range 1 + s.rngFault.IntN(6) {
		kind := faultKind(s.rngFault.IntN(int(numFaultKinds)))
		s.inPhase(between(s.rngFault, 0, length), func() { s.fault(kind) })
	}
	if s.reconfigOn() {
		s.planChanges(length)
	}
	s.inPhase(length, func() { s.beginHeal("heal") })
}

func (s *sim) randomParams() linkParams {
	r := s.rngFault
	return linkParams{
		delayMin: pick(r, 100*time.Microsecond, time.Millisecond, 5*time.Millisecond),
		jitter:   pick(r, time.Millisecond, 10*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond),
		loss:     pick(r, 0, 0, 0.02, 0.1, 0.3, 0.6),
		dup:      pick(r, 0, 0.02, 0.1),
		spike:    pick(r, 0, 0.01, 0.05),
		// A stall may outlast the caller's timeout: the handler still runs (a vote may be
		// granted and persisted) but the caller has already given up.
		spikeMax: 2 * s.net.timeout,
	}
}

type faultKind int

const (
	fCrash       faultKind = iota // crash a random member, maybe restart it later in the phase
	fCrashLeader                  // crash the current leader, maybe restart it later
	fRestart                      // restart a random crashed member
	fSplit                        // symmetric partition: two sides, no traffic between them
	fAsymmetric                   // asymmetric partition: one side hears the other, not back
	fOneWay                       // one directed link fails
	fIsolate                      // one member cut off from everyone
	fCutLeader                    // one follower cut off from the leader only
	fMend                         // all links work again (the phase's other faults go on)
	fLag                          // some members stop copying the leader's ledger
	fDisk                         // a member's vote store fails for a while (see also maybeTear)
	fWeather                      // new delay/loss/duplication/stall conditions
	fTransfer                     // an admin asks the leader to transfer leadership (L3)
	numFaultKinds
)

// fault performs one fault action. Targets are chosen now, from the state now.
func (s *sim) fault(kind faultKind) {
	switch kind {
	case fCrash, fCrashLeader:
		s.faultCrash(kind == fCrashLeader)
	case fRestart:
		s.restart(s.members[s.rngFault.IntN(len(s.members))])
	case fSplit, fAsymmetric:
		s.faultSplit(kind == fSplit)
	case fOneWay:
		n := len(s.members)
		a := s.members[s.rngFault.IntN(n)]
		b := s.members[(a.idx+1+s.rngFault.IntN(n-1))%n]
		s.cutLink(a, b)
	case fIsolate:
		s.faultIsolate()
	case fCutLeader:
		s.faultCutLeader()
	case fMend:
		s.mend()
	case fLag:
		for _, m := range s.members {
			m.lagging = s.rngFault.IntN(3) == 0
		}
		s.note("lagging replicas chosen")
	case fDisk:
		m := s.members[s.rngFault.IntN(len(s.members))]
		s.setDisk(m, true)
		s.inPhase(between(s.rngFault, s.cfg.DetectionWindow()/5, 2*s.cfg.DetectionWindow()), func() { s.setDisk(m, false) })
	case fTransfer:
		// Not before the L2 watch: a transfer still in progress (or a delayed request) would
		// change the leader on purpose during the watch.
		if s.opt.Scenario == ScenarioChaos {
			s.transfer()
		}
	case fWeather:
		s.net.p = s.randomParams()
		s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: "weather: " + s.net.p.String()})
	}
}

// faultCrash crashes a random member, or the leader if there is one and leader says so (the
// random member is drawn either way), and in 7 cases out of 10 restarts it later in the phase.
func (s *sim) faultCrash(leader bool) {
	r := s.rngFault
	m := s.members[r.IntN(len(s.members))]
	if l := s.leader(); leader && l != nil {
		m = l
	}
	s.crash(m)
	if r.IntN(10) < 7 {
		s.inPhase(between(r, s.cfg.DetectionWindow()/5, 2*s.cfg.DetectionWindow()), func() { s.restart(m) })
	}
}

// faultSplit partitions the members into two sides: no traffic between them (symmetric), or
// only from the marked side to the other (asymmetric: the marked side's messages are cut).
func (s *sim) faultSplit(symmetric bool) {
	side := s.randomSide()
	for _, a := range s.members {
		for _, b := range s.members {
			if side[a.idx] && !side[b.idx] {
				s.cutLink(a, b)
				if symmetric {
					s.cutLink(b, a)
				}
			}
		}
	}
}

// faultIsolate cuts one member off from everyone.
func (s *sim) faultIsolate() {
	m := s.members[s.rngFault.IntN(len(s.members))]
	for _, o := range s.members {
		if o != m {
			s.cutLink(m, o)
			s.cutLink(o, m)
		}
	}
}

// faultCutLeader cuts one follower off from the leader only (nothing without a leader).
func (s *sim) faultCutLeader() {
	l := s.leader()
	if l == nil {
		return
	}
	n := len(s.members)
	f := s.members[(l.idx+1+s.rngFault.IntN(n-1))%n]
	s.cutLink(l, f)
	s.cutLink(f, l)
}

// randomSide splits the members into two non-empty sides; true marks one of them.
func (s *sim) randomSide() []bool {
	n := len(s.members)
	side := make([]bool, n)
	k := 1 + s.rngFault.IntN(n-1) // members on the marked side
	for _, i := range s.rngFault.Perm(n)[:k] {
		side[i] = true
	}
	return side
}

func (s *sim) cutLink(a, b *member) {
	if !s.net.cut[a.idx][b.idx] {
		s.net.cut[a.idx][b.idx] = true
		s.tr.add(record{at: s.now, kind: rCut, a: int8(a.idx), b: int8(b.idx)})
		if s.opt.Broken == BrokenGoneOnCut && b.up && a.up {
			// The broken transport takes the silence of a cut link for a dead process.
			inc := b.inc
			s.at(0, func() { s.deliverGone(b, inc, a) })
		}
	}
}

func (s *sim) mend() {
	var was [][2]*member
	for _, a := range s.members {
		for _, b := range s.members {
			if a.idx < b.idx && a.up && b.up && (s.net.cut[a.idx][b.idx] || s.net.cut[b.idx][a.idx]) {
				was = append(was, [2]*member{a, b})
			}
		}
	}
	for _, row := range s.net.cut {
		clear(row)
	}
	s.note("all links mended")
	for _, ab := range was { // the connections the cut broke come back (announceReachable)
		s.connectLater(ab[0], ab[1])
		s.connectLater(ab[1], ab[0])
	}
}

func (s *sim) setDisk(m *member, fail bool) {
	if m.diskFail == fail {
		return
	}
	m.diskFail = fail
	if fail {
		m.store.FailSaves(errDisk)
		s.tr.add(record{at: s.now, kind: rStore, a: int8(m.idx), b: -1, note: "fails every save"})
	} else {
		m.store.FailSaves(nil)
		s.tr.add(record{at: s.now, kind: rStore, a: int8(m.idx), b: -1, note: "works again"})
	}
}

// maybeTear is the torn-write fault, called before each Save of m's vote store: during a fault
// phase, with probability s.tear, the Save writes d and then fails, as a failed fsync does.
// The elector must grant nothing on it (S2) and must stay safe if the write lands after all:
// rngDisk decides whether m's next crash keeps it, and half the time that crash comes soon, as
// a process that saw fsync fail often exits (without it, few torn writes would meet a crash).
// Members whose store fails cleanly (diskFail) are left alone.
func (s *sim) maybeTear(m *member, d memberstate.Durable) {
	if s.tear == 0 || m.diskFail || s.rngDisk.Float64() >= s.tear {
		return
	}
	survives, crash := s.rngDisk.IntN(2) == 0, s.rngDisk.IntN(2) == 0
	m.store.TearNextSave(errDisk, survives)
	s.tr.add(record{at: s.now, kind: rStore, a: int8(m.idx), b: -1, term: d.Term,
		note: fmt.Sprintf("save of term=%d voteFor=%s fails after writing; a crash keeps it: %v", d.Term, voteName(d.VoteFor), survives)})
	if crash {
		dw := s.cfg.DetectionWindow()
		inc := m.inc
		s.inPhase(between(s.rngDisk, 0, dw/5), func() {
			if m.inc == inc {
				s.crash(m)
				s.inPhase(between(s.rngDisk, dw/5, dw), func() { s.restart(m) })
			}
		})
	}
}

// leader is a member that believes it leads, the highest term first; nil when there is none.
func (s *sim) leader() *member {
	var best *member
	for _, m := range s.members {
		if m.up && m.ms.Role() == protocol.LEADER && (best == nil || m.ms.CurrTerm() > best.ms.CurrTerm()) {
			best = m
		}
	}
	return best
}
