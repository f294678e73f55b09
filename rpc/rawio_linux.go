//go:build linux

package rpc

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// socketIO gives the client's reader and writer a dialled TCP connection's socket, read and
// written with raw system calls; other connections are returned as they are.
//
// Why: Go's net package makes every read and write a blocking-capable system call
// (entersyscall), and entering one wakes the runtime's sysmon thread from its deep sleep, after
// which it polls every 20 µs for as long as the process is busy. An idle leader's heartbeat
// round is a few such bursts (two writes, two answers read), and those polls were about half of
// its thread switches (docs/design.md, "What an idle member costs"). The socket is
// non-blocking, so read(2) and write(2) on it never block and need no entersyscall: syscall
// RawConn waits for readiness through the runtime's poller (deadlines included) whenever the
// call would block, exactly as net.Conn does. Errors keep their errno (io.EOF for a closed
// stream), so the client tells a reset or a close from a timeout as before.
func socketIO(c net.Conn) (io.Reader, io.Writer) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, c
	}
	s := rawSocket{rc}
	return s, s
}

// rawSocket is a socket read and written with raw system calls, waiting through its RawConn.
type rawSocket struct{ rc syscall.RawConn }

func (s rawSocket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // nothing yet: wait for the poller
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil: // closed, or the read deadline passed
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s rawSocket) Write(b []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[written])), uintptr(len(b)-written))
			switch e {
			case 0:
				written += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the send buffer is full: wait for the poller
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil: // closed, or the write deadline passed
		return written, err
	case errno != 0:
		return written, os.NewSyscallError("write", errno)
	}
	return written, nil
}
