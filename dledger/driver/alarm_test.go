package driver

import (
	"testing"
	"time"
)

// TestAlarmTimerPostponesByReplacing: a Reset to a later time stops the armed runtime timer
// and starts another (so the runtime holds no timer at the old moment to wake for, alarm.go);
// a Reset to an earlier time moves the armed one; Stop disarms. Reset(later) on a time.Timer
// would keep the same timer, moved: the runtime then wakes at the old moment.
func TestAlarmTimerPostponesByReplacing(t *testing.T) {
	a := newAlarmTimer(time.Hour)
	defer a.Stop()
	first := a.t
	a.Reset(2 * time.Hour)
	if a.t == first {
		t.Fatal("postponed in place: the runtime keeps the old moment and wakes for it")
	}
	if first.Stop() {
		t.Fatal("the timer armed before the postponement was still armed")
	}
	second := a.t
	a.Reset(time.Minute)
	if a.t != second {
		t.Fatal("moved earlier by a new timer: that allocates and needs nothing")
	}
	a.Reset(5 * time.Millisecond) // earlier again, in place: fires
	select {
	case <-a.C:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10 s after a Reset to 5 ms")
	}
	a.Reset(time.Hour) // after it fired: at is in the past, so this is later: a new timer
	if a.t == second {
		t.Fatal("re-armed after firing in place of a new timer")
	}
	a.Stop()
	if a.t.Stop() {
		t.Fatal("Stop left the timer armed")
	}
}

// TestAlarmTimerFiresAtThePostponedTime: after being postponed many times, as at every
// heartbeat, the alarm fires once the last setting is due, and not for an earlier one.
func TestAlarmTimerFiresAtThePostponedTime(t *testing.T) {
	a := newAlarmTimer(time.Hour)
	defer a.Stop()
	for range 50 {
		a.Reset(time.Hour) // each later than the last armed moment: a new timer each time
	}
	start := time.Now()
	a.Reset(20 * time.Millisecond) // earlier: in place
	select {
	case <-a.C:
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("fired %v after a Reset to 20 ms: an earlier setting delivered", el)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10 s after a Reset to 20 ms")
	}
}
