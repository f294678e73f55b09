//go:build windows

package rpc

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing on Windows, which has no TCP_USER_TIMEOUT; keep-alive and the
// client's silence rule still find a dead peer.
func setUserTimeout(int, time.Duration) error { return nil }

// stopListening closes our duplicate of the listening socket's handle (gnet's Engine.Dup uses
// DuplicateHandle on Windows); gnet closes the listener itself when its engine stops.
func stopListening(fd int) { _ = syscall.CloseHandle(syscall.Handle(fd)) }
