//go:build unix

package main

import "syscall"

// canCreateIn asks the kernel whether this process may create entries in dir, creating
// nothing: access(2) with W_OK|X_OK, which also reports a read-only mount (EROFS), as
// systemd's ProtectSystem=strict makes every path outside ReadWritePaths.
func canCreateIn(dir string) error {
	const wOK, xOK = 0x2, 0x1
	return syscall.Access(dir, wOK|xOK)
}
