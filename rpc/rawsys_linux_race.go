//go:build linux && race

package rpc

import (
	"errors"
	"syscall"
)

// Under the race detector the socket is read and written with syscall.Read and syscall.Write,
// which tell the detector about the buffers (raw system calls are invisible to it), inside the
// same RawConn callbacks: the waiting logic is the one tested, only the idle-cost saving is
// given up.

func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if err != nil && !errors.As(err, &e) {
		return syscall.EIO
	}
	return e
}
