package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/dledger"
)

const benchReplaceUsage = `usage: dledger bench replace [--trials N] [--profile lan|dledger|fast] [flags]

Per trial, a 3-member group of real 'dledger server' processes on 127.0.0.1 loses a follower to
kill -9, and a new process at a new address replaces it (issue 31): started with --join, then
added as a non-voter, promoted once caught up and the dead member removed, through the leader's
admin API. It measures the add, the time from the add to the new member voting (the promotion
agreed) and the remove, and checks that the leader and its term never changed. The last line:
  bench: scenario=replace members=3 profile=P trials=T heartbeat_ms=H add_p50_ms=A voting_p50_ms=V ...
`

// runBenchReplace is `dledger bench replace`.
func runBenchReplace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench replace", flag.ContinueOnError)
	o := harness.ReplaceOptions{}
	fs.IntVar(&o.Trials, "trials", 10, "replacements, each on a fresh group")
	fs.StringVar(&o.Profile, "profile", dledger.ProfileLAN, "the members' timing profile: lan, dledger or fast")
	fs.StringVar(&o.Binary, "binary", "", "the dledger executable run as members (default: this one)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "the members' --log-level")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work dir (logs, data dirs) even on success")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchReplaceUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	ctx, stop := benchContext()
	defer stop()
	o.Out = stdout
	rep, err := harness.RunReplace(ctx, o)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "dledger bench replace: %v\n", err)
	case rep.Dir != "":
		fmt.Fprintf(stderr, "dledger bench replace: logs kept in %s\n", rep.Dir)
	}
	return harness.ExitCode(err)
}
