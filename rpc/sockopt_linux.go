package rpc

import (
	"syscall"
	"time"
)

// tcpUserTimeoutOpt is TCP_USER_TIMEOUT from linux/tcp.h; package syscall does not name it.
const tcpUserTimeoutOpt = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT on the socket fd.
func setUserTimeout(fd int, d time.Duration) error {
	return syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d.Milliseconds()))
}

// stopListening shuts the listening socket down through fd, our own duplicate of its
// descriptor (shutdown acts on the socket, not the descriptor), and closes fd: the kernel
// refuses new connections and resets those waiting in the accept queue. gnet v2.10.0 can
// accept a connection while its engine stops and never close it, so a peer that redials at
// that moment would hold an open connection to a stopped server.
func stopListening(fd int) {
	_ = syscall.Shutdown(fd, syscall.SHUT_RDWR)
	_ = syscall.Close(fd)
}
