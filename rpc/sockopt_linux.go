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
