//go:build !race

package rpc

// raceEnabled: the race detector is on (its system calls allocate; allocation tests skip).
const raceEnabled = false
