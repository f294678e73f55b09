//go:build !linux && !windows

package rpc

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; keep-alive and the
// client's silence rule still find a dead peer.
func setUserTimeout(int, time.Duration) error { return nil }

// stopListening only closes our duplicate here; gnet closes the listener when its engine
// stops.
func stopListening(fd int) { _ = syscall.Close(fd) }
