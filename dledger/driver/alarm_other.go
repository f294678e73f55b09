//go:build !linux

package driver

import "time"

// newPassAlarm returns the runtime-timer alarm (a timerfd, alarm_linux.go, is Linux's),
// stopped.
func newPassAlarm() passAlarm {
	a := newAlarmTimer(time.Hour)
	a.Stop()
	return a
}
