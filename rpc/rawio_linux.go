//go:build linux

package rpc

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// socketIO gives the client's reader and writer a dialled TCP connection's socket, read and
// written with raw system calls; other connections are returned as they are.
//
// Why: Go's net package makes every read and write a system call that may block
// (entersyscall), and entering one wakes the runtime's sysmon thread from its deep sleep, after
// which it polls every 20 µs for as long as the process is busy. An idle leader's heartbeat
// round is a few such bursts (two writes, two answers read), and those polls were about half of
// its thread switches (docs/design.md, "What an idle member costs"). The socket is
// non-blocking, so read(2) and write(2) on it never wait for data and need no entersyscall:
// syscall.RawConn waits for readiness through the runtime's poller whenever the call would
// block, deadlines and Close included, as net.Conn does. Errors keep their errno (io.EOF for a
// closed stream), so the client tells a reset or a close from a timeout as before.
//
// The socket must stay non-blocking: nothing may call File or Fd on the connection, which
// would switch it to blocking mode and let a raw read hold the process's only P while it
// waits.
func socketIO(c net.Conn) (io.Reader, io.Writer) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, c
	}
	s := rawSocket{rc: rc, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	return s, s
}

// rawSocket is a socket read and written with raw system calls (sysRead, sysWrite), waiting
// through its RawConn.
type rawSocket struct {
	rc            syscall.RawConn
	local, remote net.Addr
}

// opError wraps a system call's errno as net.Conn would, so logs still name the connection.
func (s rawSocket) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.local, Addr: s.remote, Err: errno}
}

func (s rawSocket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, e := sysRead(fd, b)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // nothing yet: wait for the poller
			}
			n, errno = r, e
			return true
		}
	})
	switch {
	case err != nil: // closed, or the read deadline passed
		return 0, err
	case errno != 0:
		return 0, s.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s rawSocket) Write(b []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	short := false
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			r, e := sysWrite(fd, b[written:])
			switch {
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				return false // the send buffer is full: wait for the poller
			case e != 0:
				errno = e
				return true
			case r == 0: // no progress and no error: never loop on it
				short = true
				return true
			default:
				written += r
			}
		}
		return true
	})
	switch {
	case err != nil: // closed, or the write deadline passed
		return written, err
	case errno != 0:
		return written, s.opError("write", errno)
	case short:
		return written, io.ErrUnexpectedEOF
	}
	return written, nil
}

// unreadBytes is how many bytes have arrived on c's socket and wait to be read (SIOCINQ), or
// 0 if c is no TCP connection or the kernel cannot say. It never reads them, so any goroutine
// may ask while the reader owns the connection.
func unreadBytes(c net.Conn) int {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}
