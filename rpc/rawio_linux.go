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
	s := &rawSocket{rc: rc, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	s.rd.fn, s.wr.fn = s.rd.read, s.wr.write // made once: a closure per call was an allocation per write
	return s, s
}

// rawSocket is a socket read and written with raw system calls (sysRead, sysWrite), waiting
// through its RawConn. One goroutine reads it and one writes it (the client's reader and
// writer): each direction keeps its call's state in its own rawOp, whose function RawConn calls
// was made once, where a closure over the call's variables was made (and those variables moved
// to the heap) per read and per write (issue 29, halloc: thousands of a host's allocations in a
// crash's elections).
type rawSocket struct {
	rc            syscall.RawConn
	local, remote net.Addr
	rd, wr        rawOp
}

// rawOp is one direction's call in progress: its buffer, the bytes done, and how it ended.
type rawOp struct {
	fn    func(fd uintptr) bool // rd.read or wr.write, bound once
	b     []byte
	n     int
	errno syscall.Errno
	short bool
}

// opError wraps a system call's errno as net.Conn would, so logs still name the connection.
func (s *rawSocket) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.local, Addr: s.remote, Err: errno}
}

func (s *rawSocket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	op := &s.rd
	op.b, op.n, op.errno = b, 0, 0
	err := s.rc.Read(op.fn)
	n, errno := op.n, op.errno
	op.b = nil
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

// read is the reader's RawConn callback: one read(2) of op.b, false to wait for the poller.
func (op *rawOp) read(fd uintptr) bool {
	for {
		r, e := sysRead(fd, op.b)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // nothing yet: wait for the poller
		}
		op.n, op.errno = r, e
		return true
	}
}

func (s *rawSocket) Write(b []byte) (int, error) {
	op := &s.wr
	op.b, op.n, op.errno, op.short = b, 0, 0, false
	err := s.rc.Write(op.fn)
	written, errno, short := op.n, op.errno, op.short
	op.b = nil
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

// write is the writer's RawConn callback: write(2) until op.b is written, false to wait for the
// poller when the send buffer is full.
func (op *rawOp) write(fd uintptr) bool {
	for op.n < len(op.b) {
		r, e := sysWrite(fd, op.b[op.n:])
		switch {
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false // the send buffer is full: wait for the poller
		case e != 0:
			op.errno = e
			return true
		case r == 0: // no progress and no error: never loop on it
			op.short = true
			return true
		default:
			op.n += r
		}
	}
	return true
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
