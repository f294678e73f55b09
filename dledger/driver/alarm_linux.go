//go:build linux

package driver

import (
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// fdAlarm is Run's pass alarm on Linux: a timerfd(2) that the runtime's netpoller watches,
// instead of a runtime timer.
//
// Why: the runtime sleeps until its earliest timer in two places, the netpoller's epoll_pwait
// and sysmon's deep sleep, and wakes both at that moment whether or not the timer was moved
// since: a follower's pass, postponed at every heartbeat, still wakes the netpoller once per
// heartbeat at the moment the heartbeat before had set (alarm.go, the replaced timer helps
// sysmon, not the netpoller), and a leader's pass, due at every heartbeat, wakes sysmon as
// well as the netpoller, and sysmon then polls every 20 us while the heartbeat is being sent
// (docs/design.md, "What an idle member costs", item 10). A timerfd is the kernel's timer: it
// is moved in place (timerfd_settime, a system call made raw, so it does not wake sysmon
// either), and only its expiry wakes the netpoller, as a readable descriptor. With no runtime
// timer pending, sysmon sleeps until something enters a system call.
//
// It has alarmTimer's Reset, Stop and C. A wake-up already delivered to C is not taken back
// by a later Reset or Stop (the reader then finds nothing due, as after any early wake-up);
// one the kernel has not yet delivered is (timerfd_settime clears its expiry count). Close
// releases the descriptor and the goroutine that waits on it.
type fdAlarm struct {
	c    chan struct{}
	f    *os.File
	rc   syscall.RawConn
	done chan struct{} // closed when the waiting goroutine has returned

	// fd is f's descriptor, for timerfd_settime: RawConn.Control would allocate its closure
	// at every heartbeat. mu orders the settimes before Close, so none reaches a closed (or
	// reused) descriptor number even if a caller raced Close.
	mu     sync.Mutex
	fd     uintptr
	closed bool
}

// The timerfd constants (linux/timerfd.h); the syscall package has the system call numbers
// but not these.
const (
	clockMonotonic = 1
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

// timerfdCreate is timerfd_create(2); a variable so that a test can make it fail, as a
// seccomp filter or an old kernel would.
var timerfdCreate = func() (int, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// newPassAlarm returns a timerfd alarm, or the runtime-timer one if no timerfd can be had.
// Either starts stopped.
func newPassAlarm() passAlarm {
	if a, err := newFDAlarm(); err == nil {
		return a
	}
	a := newAlarmTimer(time.Hour)
	a.Stop()
	return a
}

func newFDAlarm() (*fdAlarm, error) {
	fd, err := timerfdCreate()
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor: os.NewFile registers it with the netpoller.
	f := os.NewFile(uintptr(fd), "pass-alarm")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	a := &fdAlarm{c: make(chan struct{}, 1), f: f, rc: rc, done: make(chan struct{}), fd: uintptr(fd)}
	go a.wait()
	return a, nil
}

func (a *fdAlarm) Chan() <-chan struct{} { return a.c }

// wait delivers each expiry to C until Close.
func (a *fdAlarm) wait() {
	defer close(a.done)
	var n [8]byte // the expiry count, which nothing needs
	for {
		var errno syscall.Errno
		// The read is raw for the reason the settime is (fdAlarm): an ordinary system call
		// wakes a sleeping sysmon, at every heartbeat on a leader. It never blocks (the
		// descriptor is non-blocking); RawConn.Read waits for readiness in the netpoller.
		err := a.rc.Read(func(fd uintptr) bool {
			_, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&n[0])), uintptr(len(n)))
			return errno != syscall.EAGAIN && errno != syscall.EINTR
		})
		if err != nil {
			return // closed
		}
		// Any other error (none is expected of a monotonic timerfd) is delivered as a
		// wake-up too: a pass run early finds nothing due and re-arms the alarm.
		select {
		case a.c <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// itimerspec is struct itimerspec: no interval, the first expiry it_value from now.
type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

// settime arms the timerfd to expire d from now, or disarms it if d is zero.
func (a *fdAlarm) settime(d time.Duration) {
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, a.fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	}
}

// Reset arms the alarm to fire d from now (at once if d is not positive).
func (a *fdAlarm) Reset(d time.Duration) { a.settime(max(d, time.Nanosecond)) }

// Stop disarms the alarm.
func (a *fdAlarm) Stop() { a.settime(0) }

// Close disarms the alarm, releases its descriptor and waits for its goroutine to end.
func (a *fdAlarm) Close() {
	a.mu.Lock()
	a.closed = true
	a.f.Close()
	a.mu.Unlock()
	<-a.done
}
