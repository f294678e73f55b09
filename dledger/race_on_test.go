//go:build race

package dledger

// raceEnabled: the race detector is on (its sync.Pool drops items at random: allocation counts
// of pooled paths vary).
const raceEnabled = true
