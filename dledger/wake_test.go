package dledger

import (
	"testing"
	"time"
)

// TestWakeMovesTheAlarmToNow: a follower whose next pass is planned a detection window ahead
// is woken (its host's liveness table stopped vouching): the driver's alarm moves to now.
// Without a driver that asked for a plan, Wake sets no alarm.
func TestWakeMovesTheAlarmToNow(t *testing.T) {
	u := newUnit(t, 3, nil)
	u.setTerm(4, "")
	u.e.HandleHeartBeat(hbReq("n1", 4))
	var alarm alarmLog
	u.e.SetPassAlarm(alarm.set)
	u.e.Wake()
	if _, n := alarm.last(); n != 0 {
		t.Fatalf("Wake before any plan set the alarm %d times", n)
	}
	planned := u.e.NextPassAt()
	if !planned.After(u.clock.Now().Add(time.Millisecond)) {
		t.Fatalf("the follower's pass is planned at %v, now %v: nothing to wake", planned, u.clock.Now())
	}
	u.e.Wake()
	if at, n := alarm.last(); n != 2 || !at.Equal(u.clock.Now()) {
		t.Fatalf("after Wake the alarm is at %v (%d sets), want now %v", at, n, u.clock.Now())
	}
}
