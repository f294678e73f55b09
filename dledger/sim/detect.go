package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dledger-go/dledger/dledger/detect"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Adaptive failure detection in the simulator (docs/protocol.md 14):
//
//   - round-trip distributions: a rejoin run draws its calm network from links, from a LAN to
//     a slow WAN whose round trips (340-460 ms) are above what the profile's fixed window
//     tolerates (400 ms), and uses it in every heal phase and in the L2 watch;
//   - pauses: in a third of the rejoin runs the watched follower is stopped (SIGSTOP) for 1-5
//     detection windows instead of cut off, and resumes with its pass first or its messages
//     first;
//   - WIN, after every event: every member's windows are within their bounds;
//   - CALM, during the L2 watch: no member but the cut-off or stopped one becomes a candidate.
//     A leader heard every interval over a calm network is never suspected; a window below
//     its floor (the planted bug window-below-floor) makes followers time out between two
//     heartbeats.

// detState is the simulator's part of it.
type detState struct {
	link    linkParams // the calm network of this run (calm, except in rejoin runs)
	pause   bool       // the L2 watch stops its follower instead of cutting it off
	watched *member    // the follower cut off or stopped in the L2 watch
}

// links are the networks a rejoin run's calm phases may have: one way, delayMin + [0, jitter).
var links = []linkParams{
	calm,
	{delayMin: 2 * time.Millisecond, jitter: 3 * time.Millisecond},    // a metro link
	{delayMin: 50 * time.Millisecond, jitter: 30 * time.Millisecond},  // a WAN
	{delayMin: 170 * time.Millisecond, jitter: 60 * time.Millisecond}, // a slow WAN: 340-460 ms round trips
}

// chooseLink draws the run's calm network (rejoin runs only: the chaos runs keep the LAN of
// their heal phases, so their L1 bound means what it always meant) and whether its watch
// pauses.
func (s *sim) chooseLink(r *rand.Rand) {
	s.det.link = calm
	if s.opt.Scenario != ScenarioRejoin {
		return
	}
	s.det.link = links[r.IntN(len(links))]
	s.det.pause = r.IntN(3) == 0
	s.tr.add(record{at: 0, kind: rPhase, a: -1, b: -1, note: fmt.Sprintf("calm network %v, watch %s", s.det.link,
		map[bool]string{true: "pauses", false: "cuts"}[s.det.pause])})
}

// stop freezes m (SIGSTOP): no passes; what reaches it waits until resume.
func (s *sim) stop(m *member) {
	if m.up {
		m.stopped = true
		m.stops++
		s.note("%s stopped", m.id)
	}
}

// resume continues a stopped m (SIGCONT). With passFirst its first pass runs before it reads
// what reached it while stopped, else after; a real process does either.
func (s *sim) resume(m *member, passFirst bool) {
	if !m.stopped {
		return
	}
	m.stopped = false
	s.note("%s resumed", m.id)
	s.touch(m)
	if passFirst {
		m.e.Tick()
		m.e.NextPassAt() // re-plan, as the driver does after every pass (the alarm queues it)
	}
	held := m.held
	m.held = nil
	for _, f := range held {
		f()
	}
	s.check()
}

// windowCheck is WIN: m's windows are within the bounds of docs/protocol.md 14.2. Without
// samples each is the profile's window; the floors hold whatever the samples (the margin
// floors are the smallest margins), and so do the ceilings.
func (s *sim) windowCheck(m *member) {
	b := s.cfg.DetectorBounds()
	w := m.e.DetectionWindows()
	fLo, qLo := b.Interval+b.Margin, b.Interval+detect.QuorumMargins*b.QuorumMargin
	qHi := max(b.Ceiling, b.QuorumCeiling)
	switch {
	case !within(w.Follower, min(fLo, b.Ceiling), b.Ceiling):
		s.fail("WIN", "%s's follower timeout %v is outside [%v, %v]", m.id, w.Follower, fLo, b.Ceiling)
	case !within(w.Sticky, min(fLo, b.Ceiling), b.Ceiling):
		s.fail("WIN", "%s's stickiness window %v is outside [%v, %v]", m.id, w.Sticky, fLo, b.Ceiling)
	case !within(w.Quorum, min(qLo, b.Ceiling), qHi):
		s.fail("WIN", "%s's check-quorum window %v is outside [%v, %v]", m.id, w.Quorum, qLo, qHi)
	}
}

// within says whether lo <= w <= hi: both bounds are windows the rule may reach.
func within(w, lo, hi time.Duration) bool { return w >= lo && w <= hi }

// calmCheck is CALM, during the L2 watch: no member but the watched one becomes a candidate.
func (s *sim) calmCheck() {
	for _, m := range s.members {
		if m != s.det.watched && m != s.live.watchLeader && m.up && m.ms.Role() == protocol.CANDIDATE {
			s.fail("CALM", "%s became a candidate while its leader %s was heard over a calm network (%v)",
				m.id, s.live.watchLeader.id, s.det.link)
			return
		}
	}
}

// watchFault cuts f off (as the L2 watch always did) or, in a pausing run, stops it; the
// returned function undoes it.
func (s *sim) watchFault(f, l *member) (undo func()) {
	s.det.watched = f
	if s.det.pause {
		s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: "stop " + f.id})
		s.stop(f)
		passFirst := s.rngFault.IntN(2) == 0
		return func() { s.resume(f, passFirst) }
	}
	if s.leaderOnly {
		s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: "cut off " + f.id + " from the leader " + l.id + " only"})
		s.cutLink(f, l)
		s.cutLink(l, f)
	} else {
		s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: "cut off " + f.id + " from every member"})
		for _, o := range s.members {
			if o != f {
				s.cutLink(f, o)
				s.cutLink(o, f)
			}
		}
	}
	return s.mend
}
