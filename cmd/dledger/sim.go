package main

import (
	"fmt"
	"io"
)

// runSim is replaced by the simulator's CLI (dledger/sim).
func runSim(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "dledger sim: not built yet")
	return 2
}
