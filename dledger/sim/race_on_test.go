//go:build race

package sim

// raceEnabled: the race detector slows the simulator about 30 times. Its value here is in
// covering the code paths (Campaign's workers are the only concurrency), so race builds run
// the same seeds for less virtual time.
const raceEnabled = true
