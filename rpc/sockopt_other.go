//go:build !linux

package rpc

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; keep-alive and the
// client's silence rule still find a dead peer.
func setUserTimeout(int, time.Duration) error { return nil }
