package driver

import "time"

// passAlarm is Run's alarm: fdAlarm where the system has a timerfd (alarm_linux.go), else
// alarmTimer. Reset and Stop are serialized by the caller; a wake-up on Chan may be stale
// (the pass it runs then finds nothing due). Close, after the last Reset or Stop, releases it.
type passAlarm interface {
	Reset(d time.Duration)
	Stop()
	Chan() <-chan struct{}
	Close()
}

// alarmTimer is the timer of a pass that moves later far more often than it is due: an idle
// follower's pass is postponed at every heartbeat (its timeout starts again). It has
// time.Timer's Reset, Stop and C, but a Reset to a later time stops the armed timer and
// starts a new one instead of moving it.
//
// Why: the runtime keeps a timer moved later at its old place in the timer heap until that
// moment has passed, and then wakes the process (the netpoller and sysmon) to find nothing
// due. With the fixed 600 ms follower timeout that moment fell on a later heartbeat's
// arrival; with an adapted one (300 ms with lan, docs/protocol.md 14) it falls between two
// heartbeats: one needless wake-up per heartbeat, about +17 thread switches a second and
// +0.05 % of a core per idle follower (BENCHMARKS.md, "Adaptive failure detection"). Adding a
// timer cleans the head of the heap of the processor adding it, dropping the stopped one,
// and a member process runs on one processor (cmd/dledger, useOneProcessor): nothing wakes
// until a pass is due. A move earlier (or the first arming) resets the timer in place, which
// wakes nobody needlessly and allocates nothing.
//
// Unlike time.Timer, a timer stopped too late (its function already running) may still
// deliver: the reader then finds nothing due, as after any early wake-up. Not safe for
// concurrent use: the caller serializes Reset and Stop, as it did for the time.Timer.
type alarmTimer struct {
	C    <-chan struct{}
	c    chan struct{}
	t    *time.Timer
	at   time.Time // when t fires; zero while stopped
	fire func()
}

func newAlarmTimer(d time.Duration) *alarmTimer {
	c := make(chan struct{}, 1)
	a := &alarmTimer{C: c, c: c}
	a.fire = func() {
		select {
		case a.c <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	a.t = time.AfterFunc(d, a.fire)
	a.at = time.Now().Add(d)
	return a
}

// Reset arms the timer to fire d from now.
func (a *alarmTimer) Reset(d time.Duration) {
	at := time.Now().Add(d)
	if !a.at.IsZero() && at.After(a.at) {
		a.t.Stop()
		a.t = time.AfterFunc(d, a.fire)
	} else {
		a.t.Reset(d)
	}
	a.at = at
}

// Stop disarms the timer.
func (a *alarmTimer) Stop() {
	a.t.Stop()
	a.at = time.Time{}
}

// Chan is C, for passAlarm.
func (a *alarmTimer) Chan() <-chan struct{} { return a.C }

// Close is Stop: a runtime timer holds nothing to release.
func (a *alarmTimer) Close() { a.Stop() }
