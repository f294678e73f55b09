//go:build linux && !race

package rpc

import (
	"syscall"
	"unsafe"
)

// sysRead is read(2) without entersyscall (see socketIO). b must not be empty.
func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(r), e
}

// sysWrite is write(2) without entersyscall (see socketIO). b must not be empty.
func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(r), e
}
