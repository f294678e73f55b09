// Command dledger-lab is the lab outside the product: benchmarks that need more than the
// product binary should carry. It runs groups of real `dledger server` processes (the dledger
// binary beside this one, or --binary) on 127.0.0.1:
//
//	dledger-lab calm     faults that must not move leadership (ip netns, ss -K and cgroup
//	                     writes for some scenarios, as root; skipped with the reason otherwise)
//	dledger-lab compare  our failover side by side with etcd and ZooKeeper (execs both)
//
// `dledger bench failover` stays in the product binary. The benchmarks share package
// cmd/internal/harness; their errors map to exit statuses here: 0 done, 1 incomplete (a
// scenario broke off, a trial failed, a system was skipped), 2 invalid flags, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

const usage = `usage: dledger-lab <command> [flags]

commands:
  calm      faults that must not move leadership: dledger-lab calm [--scenario all|NAME,...]
  compare   failover side by side with etcd and ZooKeeper: dledger-lab compare [--trials 20]

Both run the dledger binary beside this one (or --binary) as members, on 127.0.0.1.
Run 'dledger-lab <command> -h' for the command's flags.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "calm":
		return runCalm(args[1:], stdout, stderr)
	case "compare":
		return runCompare(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dledger-lab: unknown command %q\n%s", args[0], usage)
	return 2
}

// finish prints a run's outcome (the error, or where the logs were kept) and returns the exit
// status.
func finish(name string, dir string, err error, stderr io.Writer) int {
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "dledger-lab %s: %v\n", name, err)
	case dir != "":
		fmt.Fprintf(stderr, "dledger-lab %s: logs kept in %s\n", name, dir)
	}
	return harness.ExitCode(err)
}

// labContext ends on Ctrl-C, SIGTERM or SIGHUP. The members run in their own process groups,
// so a terminal's Ctrl-C reaches only this process; cancelling ctx makes the benchmark stop
// them all.
func labContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

// memberBinary is the dledger executable the members run when --binary is not given: the one
// beside this executable, else dledger on PATH; "" if neither exists (the options then name
// --binary).
func memberBinary() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "dledger")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("dledger"); err == nil {
		return p
	}
	return ""
}

// noBinary reports (and prints) that no member binary was found or given.
func noBinary(name, binary string, stderr io.Writer) bool {
	if binary != "" {
		return false
	}
	fmt.Fprintf(stderr, "dledger-lab %s: --binary: no dledger beside this executable or on PATH; pass --binary\n", name)
	return true
}

// parseFlags parses args; on an error or -h it prints and returns the exit status and false.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return 0, false
		}
		fmt.Fprintf(stderr, "dledger-lab %s: %v (see 'dledger-lab %s -h')\n", fs.Name(), err, fs.Name())
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dledger-lab %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}
