//go:build linux

package driver

import (
	"errors"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// armedFor is timerfd_gettime(2): how long until a's timerfd expires, 0 if disarmed.
func armedFor(t *testing.T, a *fdAlarm) time.Duration {
	t.Helper()
	var cur itimerspec
	var errno syscall.Errno
	if err := a.rc.Control(func(fd uintptr) {
		_, _, errno = syscall.RawSyscall(syscall.SYS_TIMERFD_GETTIME, fd, uintptr(unsafe.Pointer(&cur)), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return time.Duration(cur.value.Nano())
}

func newTestFDAlarm(t *testing.T) *fdAlarm {
	t.Helper()
	a, ok := newPassAlarm().(*fdAlarm)
	if !ok {
		t.Fatal("no timerfd alarm on Linux: the pass alarm is a runtime timer, which wakes the netpoller and sysmon (alarm_linux.go)")
	}
	t.Cleanup(a.Close)
	return a
}

// TestFDAlarmMovesTheKernelTimerInPlace: on Linux the pass alarm is a timerfd, moved later and
// earlier in place, without a runtime timer (a postponement allocates nothing, where
// alarmTimer's allocates the timer that replaces the old one), and disarmed by Stop.
func TestFDAlarmMovesTheKernelTimerInPlace(t *testing.T) {
	a := newTestFDAlarm(t)
	if d := armedFor(t, a); d != 0 {
		t.Fatalf("a new alarm is armed for %v, want stopped", d)
	}
	for _, want := range []time.Duration{time.Hour, 2 * time.Hour, time.Minute} {
		a.Reset(want)
		if d := armedFor(t, a); d > want || d < want-time.Minute/2 {
			t.Fatalf("Reset(%v): the timerfd expires in %v", want, d)
		}
	}
	later := time.Hour
	if n := testing.AllocsPerRun(100, func() { later += time.Second; a.Reset(later) }); n != 0 {
		t.Fatalf("a postponement allocates %v times: not a timer moved in place", n)
	}
	a.Stop()
	if d := armedFor(t, a); d != 0 {
		t.Fatalf("Stop left the timerfd armed for %v", d)
	}
	var at *alarmTimer
	if n := testing.AllocsPerRun(100, func() {
		if at == nil {
			at = newAlarmTimer(time.Hour)
		}
		later += time.Second
		at.Reset(later)
	}); n == 0 {
		t.Fatal("alarmTimer's postponement allocates nothing: the allocation check above proves nothing")
	}
	at.Stop()
}

// TestFDAlarmFiresAtTheLastSetting: postponed many times, as at every heartbeat, then moved
// earlier, the alarm fires once the last setting is due, not before; Reset with a past
// moment fires at once, as time.Timer's does.
func TestFDAlarmFiresAtTheLastSetting(t *testing.T) {
	a := newTestFDAlarm(t)
	for i := range 50 {
		a.Reset(time.Hour + time.Duration(i)*time.Second)
	}
	start := time.Now()
	a.Reset(20 * time.Millisecond)
	select {
	case <-a.Chan():
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("fired %v after a Reset to 20 ms: an earlier setting delivered", el)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10 s after a Reset to 20 ms")
	}
	a.Reset(-time.Second) // a pass already due: at once (0 would disarm a timerfd)
	select {
	case <-a.Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10 s after a Reset to a past moment")
	}
}

// TestFDAlarmCloseReleasesItsDescriptorAndGoroutine: Close ends the waiting goroutine and
// closes the descriptor; a Reset or Stop after it (a racing alarm) reaches no descriptor.
func TestFDAlarmCloseReleasesItsDescriptorAndGoroutine(t *testing.T) {
	a, ok := newPassAlarm().(*fdAlarm)
	if !ok {
		t.Fatal("no timerfd alarm on Linux")
	}
	a.Reset(time.Hour)
	a.Close() // waits for the goroutine
	select {
	case <-a.done:
	default:
		t.Fatal("Close returned with the alarm's goroutine still running")
	}
	if err := a.rc.Control(func(uintptr) {}); err == nil {
		t.Fatal("the descriptor is still open after Close")
	}
	// The descriptor number is free again, and the next descriptor likely takes it: a late
	// Reset of the closed alarm must not arm that one.
	b := newTestFDAlarm(t)
	a.Reset(time.Hour)
	a.Stop()
	a.Reset(time.Hour)
	if d := armedFor(t, b); d != 0 {
		t.Fatalf("a Reset after Close armed another descriptor (number %d, was %d) for %v", b.fd, a.fd, d)
	}
}

// TestPassAlarmFallsBackWithoutATimerfd: where timerfd_create fails (a seccomp filter, an old
// kernel), the pass alarm is the runtime-timer one, and still fires.
func TestPassAlarmFallsBackWithoutATimerfd(t *testing.T) {
	create := timerfdCreate
	timerfdCreate = func() (int, error) { return -1, errors.New("no timerfd here") }
	defer func() { timerfdCreate = create }()
	a := newPassAlarm()
	defer a.Close()
	if _, ok := a.(*alarmTimer); !ok {
		t.Fatalf("pass alarm without a timerfd is a %T", a)
	}
	a.Reset(time.Millisecond)
	select {
	case <-a.Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("the fallback alarm did not fire")
	}
}
