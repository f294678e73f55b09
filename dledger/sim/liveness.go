package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// L1Rounds is how many contested vote rounds the L1 bound allows for after the heal.
const L1Rounds = 8

// L1Bound is the longest a heal phase may go without a stable leader (docs/protocol.md section 9, L1): from the
// moment the faults heal and a quorum is up and connected, until a leader is followed by a
// quorum at its term. Each part is a wait the elector may legitimately be in when the heal
// starts, in the order it can meet them:
//
//	DetectionWindow                      a follower still trusting a dead or cut-off leader, or a
//	                                     leader without a quorum, gives up (leak x heartbeat)
//	+ MaxVoteRound                       a vote round started during the faults runs to its deadline
//	+ DetectionWindow + MaxVoteInterval  the longest back-off (REJECT_ALREADY_HAS_LEADER:
//	                                     delay + leak x heartbeat)
//	+ L1Rounds x (MaxVoteRound + 2 x MaxVoteInterval)
//	                                     contested rounds: a split vote, a stale higher term, a
//	                                     candidate with an older ledger (back-off + maxVoteInterval)
//
// "lan": 0.6 + 0.6 + 0.9 + 8 x 1.2 = 11.7 s; "dledger": 6 + 3 + 7 + 8 x 5 = 56 s. Contention
// is random, so the bound is one no seed should reach, not a hard guarantee; a run reports its
// slowest recovery next to it (Result.MaxRecovery).
func L1Bound(cfg dledger.Config) time.Duration {
	return cfg.DetectionWindow() + cfg.MaxVoteRound() + cfg.DetectionWindow() + cfg.MaxVoteInterval +
		L1Rounds*(cfg.MaxVoteRound()+2*cfg.MaxVoteInterval)
}

// liveness is the state of the phase that checks L1 (a heal) or L2 (the rejoin watch).
type liveness struct {
	healing     bool
	healStart   time.Duration
	healID      int
	onStable    func(leader *member, term int64)
	heals       int
	maxRecovery time.Duration

	needAll bool // the heal waits for every member to follow, not just a quorum

	watching    bool // L2: the leader must not change while set
	watchLeader *member
	watchTerm   int64
}

// beginHeal ends the faults: every link works, the network is calm, stores work, lagging
// replicas catch up, and crashed members restart except, sometimes, a minority that stays down
// (a quorum is still up and connected). Then L1: a stable leader within L1Bound.
func (s *sim) beginHeal(why string) {
	s.phaseID++
	r := s.rngFault
	s.mend()
	s.net.p = s.det.link
	s.tear = 0
	for _, m := range s.members {
		m.lagging = false
		s.setDisk(m, false)
	}
	s.resumeAll() // paused members (reconfig.go; none in other runs)
	keepDown := 0
	rejoinNext := s.opt.Scenario == ScenarioRejoin && s.preCycles == 0
	if r.IntN(4) == 0 && !rejoinNext && !s.reconfigOn() { // with reconfigurations, quorums move
		keepDown = 1 + r.IntN(len(s.members)-s.quorum)
	}
	s.restartAllBut(r, keepDown)
	s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: why + ": network calm, links mended, quorum up"})
	if rejoinNext {
		s.rejoinWatch()
		return
	}
	s.expectLeader(func(*member, int64) {
		// Sometimes hand leadership over on a calm network, where a transfer should succeed.
		if r.IntN(3) == 0 && s.opt.Scenario == ScenarioChaos {
			s.inPhase(between(r, 0, s.cfg.HeartBeatInterval), s.transfer)
		}
		if s.reconfigOn() { // a change in the calm, where it should commit (reconfig.go)
			s.inPhase(between(s.rngReconf, 0, s.cfg.HeartBeatInterval), s.reconfigure)
		}
		// Let the leader lead for a few heartbeats before the next faults.
		s.inPhase(between(r, s.cfg.HeartBeatInterval, 3*s.cfg.HeartBeatInterval), func() {
			switch {
			case s.opt.Scenario == ScenarioRejoin:
				s.preCycles--
			case s.now >= s.opt.Duration && s.preferred != "":
				s.awaitPreferred(s.now + PreferredBound(s.cfg))
				return
			case s.now >= s.opt.Duration:
				s.finished = true
				return
			}
			s.beginFault()
		})
	})
}

// restartAllBut restarts the crashed members but keepDown of them, taken in an order drawn
// from r, so which stay down is part of the seed.
func (s *sim) restartAllBut(r *rand.Rand, keepDown int) {
	for _, i := range r.Perm(len(s.members)) {
		m := s.members[i]
		if m.up {
			continue
		}
		if keepDown > 0 {
			keepDown--
			continue
		}
		s.restart(m)
	}
}

// expectLeader starts an L1 check: then runs once a stable leader exists, and the run fails
// if none appears within L1Bound.
func (s *sim) expectLeader(then func(*member, int64)) {
	s.live.healing = true
	s.live.healStart = s.now
	s.live.healID++
	s.live.onStable = then
	id := s.live.healID
	bound := L1Bound(s.cfg)
	s.at(bound, func() {
		if !s.live.healing || s.live.healID != id {
			return
		}
		if s.ceilingReached() {
			// No new term can start at protocol.MaxTerm: liveness is lost there by design
			// (ExtremeAtCeiling). S1-S5 held until now; the run ends.
			s.note("L1 not checked: a member reached the term ceiling %d; the run ends", protocol.MaxTerm)
			s.finished = true
			return
		}
		s.fail("L1", "no leader followed by a quorum within %v (L1Bound) of the heal", bound)
	})
}

// liveCheck runs after every event: it ends a heal once a leader is stable and checks the L2
// watch.
func (s *sim) liveCheck() {
	if s.live.healing {
		if l, term := s.stableLeader(); l != nil && (!s.live.needAll || s.allFollow(l, term)) {
			rec := s.now - s.live.healStart
			s.live.healing, s.live.needAll = false, false
			s.live.heals++
			s.live.maxRecovery = max(s.live.maxRecovery, rec)
			s.tr.add(record{at: s.now, kind: rStable, a: int8(l.idx), b: -1, term: term, x: int64(rec)})
			then := s.live.onStable
			s.live.onStable = nil
			then(l, term)
		}
	}
	if s.live.watching {
		l := s.live.watchLeader
		if !l.up || l.ms.Role() != protocol.LEADER || l.ms.CurrTerm() != s.live.watchTerm {
			s.fail("L2", "leader %s of term %d lost leadership while a follower was cut off or rejoining", l.id, s.live.watchTerm)
		}
		s.calmCheck()
	}
}

// stableLeader is a leader that a quorum (itself included) follows at its term, or nil.
func (s *sim) stableLeader() (*member, int64) {
	for _, l := range s.members {
		if !l.up || l.ms.Role() != protocol.LEADER {
			continue
		}
		term, n := l.ms.CurrTerm(), 1
		counts, need := s.countsIn(l)
		for _, f := range s.members {
			if f != l && f.up && f.ms.Role() == protocol.FOLLOWER && f.ms.LeaderID() == l.id && f.ms.CurrTerm() == term && counts(f) {
				n++
			}
		}
		if n >= need {
			return l, term
		}
	}
	return nil, 0
}

// beginRejoin is the L2 scenario. First 0-2 chaos cycles, so the members carry the varied
// state faults leave behind (lost rounds, stale higher terms, restarts); then a heal with every
// member up, until all of them follow one leader. With that stable leader and no other fault,
// a follower is cut off from every member for 1-5 detection windows, then rejoins. The leader
// must keep its leadership and its term throughout, and for a while after the rejoin: long
// enough for the rejoined member to time out, campaign and be answered.
func (s *sim) beginRejoin() {
	s.preCycles = s.rngFault.IntN(3)
	s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1,
		note: fmt.Sprintf("rejoin scenario: %d chaos cycles, then cut a follower off", s.preCycles)})
	s.beginHeal("start")
}

// rejoinWatch waits for every member to follow the leader, then cuts one off and watches.
func (s *sim) rejoinWatch() {
	r := s.rngFault
	dw := s.cfg.DetectionWindow()
	s.expectAll(func(l *member, term int64) {
		s.inPhase(between(r, dw, 2*dw), func() {
			if !s.allFollow(l, term) {
				s.note("the group changed before the cut, with no fault at all; waiting again")
				s.rejoinWatch()
				return
			}
			f := s.members[(l.idx+1+r.IntN(len(s.members)-1))%len(s.members)]
			s.live.watching, s.live.watchLeader, s.live.watchTerm = true, l, term
			undo := s.watchFault(f, l) // a cut, or a stop (detect.go)
			s.inPhase(between(r, dw, 5*dw), func() {
				undo()
				s.tr.add(record{at: s.now, kind: rPhase, a: -1, b: -1, note: f.id + " rejoins"})
				s.inPhase(3*dw+s.cfg.MaxVoteRound()+s.cfg.MaxVoteInterval, func() { s.finished = true })
			})
		})
	})
}

// expectAll is expectLeader for the whole group: then runs once every member follows one
// leader; within L1Bound, or L1 fails.
func (s *sim) expectAll(then func(*member, int64)) {
	s.live.needAll = true
	s.expectLeader(then)
}

// allFollow says whether every member is up and follows l at term (l itself leading).
func (s *sim) allFollow(l *member, term int64) bool {
	if !l.up || l.ms.Role() != protocol.LEADER || l.ms.CurrTerm() != term {
		return false
	}
	for _, f := range s.members {
		if f != l && (!f.up || f.ms.Role() != protocol.FOLLOWER || f.ms.LeaderID() != l.id || f.ms.CurrTerm() != term) {
			return false
		}
	}
	return true
}

// PreferredBound is how long a healed group may take to hand leadership to its preferred
// member: the longest back-off after failed hand-overs, two transfers and a check interval.
func PreferredBound(cfg dledger.Config) time.Duration {
	return dledger.MaxPreferredBackoff + 2*cfg.TransferBound() + time.Second
}

// awaitPreferred ends a run with a preferred leader: no more faults, and the run goes on until
// the preferred member leads or the deadline passes (Result.FinalLeader tells which). A
// preferred member that is down at the end cannot lead; the run ends at once.
func (s *sim) awaitPreferred(deadline time.Duration) {
	var p *member
	for _, m := range s.members {
		if m.id == s.preferred {
			p = m
		}
	}
	if !p.up || s.leader() == p || s.now >= deadline {
		s.finished = true
		return
	}
	s.inPhase(s.cfg.HeartBeatInterval, func() { s.awaitPreferred(deadline) })
}
