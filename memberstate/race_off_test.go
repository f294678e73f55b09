//go:build !race

package memberstate

const raceEnabled = false
