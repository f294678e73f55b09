package dledger

import (
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// When passes run (docs/protocol.md 6.3).
//
// DLedger's StateMaintainer runs a pass every 10 ms whether or not anything is due. On this
// project's reference machine a bare Go ticker at 10 ms costs 1.1 % of a core in wake-ups alone
// (0.37 % at 50 ms, 0.07 % at 1 s), more than an idle member may spend. So a pass runs when the
// elector says one is due: NextPassAt is the earliest moment at which a pass can change
// anything (a heartbeat to send, a round deadline, a follower timeout, a re-vote time, a
// transfer deadline), and every entry point that moves that moment tells the driver through
// the alarm (SetPassAlarm): earlier (an answer that decides a round, a vote that makes a
// re-vote due at once) or later (a leader's heartbeat postpones a follower's timeout, so an
// idle follower's driver sleeps until its leader has been silent for the detection window
// instead of waking after every other heartbeat to find nothing to do). A pass before
// NextPassAt would do nothing, so skipping it changes no decision; a due pass runs at once
// instead of at the next 10 ms tick, which is also what makes a decision take effect as soon
// as its answers are in. A pass that is already due is never postponed: it is the pass that
// notices a stall of the member's own process (Tick).

// maxPassGap bounds how far ahead of the latest entry point a pass is planned, even when
// nothing is due, so that a stall of the member's own process (a stop, a long pause) that
// outlasts it is noticed by the pass that ends it: a stall shorter than the remaining sleep goes
// unnoticed, and a detection window plus a heartbeat interval is shorter than any deadline a
// peer keeps for this member's answer (a transfer's TransferBound). It is longer than a
// follower's timeout, so a follower's pass is planned by its timeout, which each heartbeat
// postpones: an idle follower whose leader is heard makes no pass.
func (c Config) maxPassGap() time.Duration { return c.DetectionWindow() + c.HeartBeatInterval }

// NextPassAt returns the time of the next pass the driver should run (now or earlier: at
// once), never later than maxPassGap from now, and sets the alarm (if any) for it. The driver
// sleeps until then, or until the alarm is moved. A driver must set the alarm (SetPassAlarm):
// without it nothing tells the driver when an answer makes a pass due sooner (this replaced
// the Reschedule channel, which only ever moved a pass earlier). A driver calls it after every
// pass (Tick), which plans nothing itself: the pass that ran stays planned, due, until then.
func (e *Elector) NextPassAt() time.Time {
	e.mu.Lock()
	defer e.unlockQuiet()
	now := e.clock.Now()
	next := e.nextPassAt(now)
	e.plan(next)
	return next
}

// SetPassAlarm gives the elector the driver's alarm: set is called, with the elector's lock
// held, whenever the time of the next pass changes after NextPassAt named it, earlier or later,
// and by NextPassAt itself. It must not block or call the elector: resetting a time.Timer is
// what it is for. Calls are ordered by the lock, so the last one names the pass that is due.
func (e *Elector) SetPassAlarm(set func(at time.Time)) {
	e.mu.Lock()
	defer e.unlockQuiet()
	e.alarm = set
}

// plan records next as the pass the driver sleeps until and tells the alarm.
func (e *Elector) plan(next time.Time) {
	e.plannedPass = next
	if e.alarm != nil {
		e.alarm(next)
	}
}

// noteSchedule runs at the end of every entry point, with the lock held: if the next pass is
// now due earlier than the time the driver sleeps until, or later and the planned pass is not
// due yet, move it. An entry point that changed nothing (the news of a gone member to a member
// that neither follows it nor leads) skips it (unlockUnlessChanged, answers.go): its deadlines
// are where the last plan found them, so the plan could only be postponed. So does a pass
// (Tick, unlockAfterPass): its driver plans right after it (NextPassAt).
func (e *Elector) noteSchedule() {
	if e.plannedPass.IsZero() {
		return // no driver has asked yet (the simulator and the tests tick on their own)
	}
	now := e.clock.Now()
	next := e.nextPassAt(now)
	if next.Before(e.plannedPass) || (next.After(e.plannedPass) && now.Before(e.plannedPass)) {
		e.plan(next)
	}
}

// deadline is when a pass next has something to do for one part of the elector: ok says there
// is such a time, t is it. Each part of the elector names its own (the role's pass, the
// transfer's three machines, succession and start-up), next to the pass that acts on it, so a
// part's deadline cannot be added to its pass and forgotten here.
type deadline struct {
	t  time.Time
	ok bool
}

// never: nothing to do until something else happens.
var never deadline

// dueAt is a deadline the pass tests with "not before" (reached: >=).
func dueAt(t time.Time) deadline { return deadline{t: t, ok: true} }

// dueAfter is a deadline the pass tests with "after" (strictly later): due one nanosecond past t.
func dueAfter(t time.Time) deadline { return dueAt(t.Add(time.Nanosecond)) }

// nextPassAt is the earliest time at which a pass changes anything: the earliest of the
// deadlines every part of the elector names (deadlines), and never later than maxPassGap.
//
// A deadline at the zero time means "at once" (REVOTE_IMMEDIATELY, a take's first round, a new
// leader's first preferred-leader check): it is due now, the moment it was decided. Planned at
// the zero time, the pass would count as planned by no driver (plannedPass), its due time
// would fall back to the previous pass (passDue), and a member whose previous pass ran more
// than StallThreshold earlier would take that pass, run at once, for the end of a stall of its
// own process, and refuse to take leadership for a heartbeat interval.
func (e *Elector) nextPassAt(now time.Time) time.Time {
	next := now.Add(e.passGap())
	for _, d := range e.deadlines(now) {
		t := d.t
		if t.IsZero() {
			t = now
		}
		if d.ok && t.Before(next) {
			next = t
		}
	}
	return next
}

// deadlines lists the next deadline of every part of the elector that a pass serves.
func (e *Elector) deadlines(now time.Time) [9]deadline {
	preferred := never // the check runs while leading (preferredOn), and then lead is made
	if e.preferredOn() {
		preferred = e.lead.preferred.next(true)
	}
	if e.bugs.ForgetPreferredDeadline { // the PASS oracle's planted bug (dledger/sim/broken.go)
		preferred = never
	}
	return [...]deadline{
		e.roleDeadline(now),
		e.handOver.next(),
		e.take.next(e.ms, now),
		preferred,
		e.succession.next(),
		e.startUp.next(),
		e.lost.next(),
		e.changeDeadline(now),
		e.forceDeadline(),
	}
}

// roleDeadline is the next deadline of the pass of this member's role.
func (e *Elector) roleDeadline(now time.Time) deadline {
	switch e.ms.Role() {
	case protocol.LEADER:
		return e.leaderDeadline(now)
	case protocol.FOLLOWER:
		return e.followerDeadline(now)
	case protocol.CANDIDATE:
		return e.candidateDeadline(now)
	}
	return never
}

// earliest is the earlier of two deadlines.
func earliest(a, b deadline) deadline {
	if !a.ok || (b.ok && b.t.Before(a.t)) {
		return b
	}
	return a
}

// passDue is the time the current pass was due: the time NextPassAt promised the driver, or,
// for a caller that ticks on its own every MaintainInterval (tests), the previous pass. A pass
// that runs more than StallThreshold after it was due ends a stall of this member's process.
func (e *Elector) passDue() time.Time {
	if !e.plannedPass.IsZero() {
		return e.plannedPass
	}
	return e.lastPass
}
