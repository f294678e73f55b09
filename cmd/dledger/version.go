package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/dledger-go/dledger/metrics"
)

// runVersion prints what `dledger version` and `dledger --version` print: the same build the
// metric dledger_build_info shows.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: dledger version (or dledger --version)") }
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	writeVersion(stdout, metrics.ReadBuild())
	return 0
}

func writeVersion(w io.Writer, b metrics.Build) {
	rev := b.Revision
	switch {
	case rev == "":
		rev = "unknown (built without VCS information)"
	case b.Dirty:
		rev += " (dirty: uncommitted changes)"
	}
	fmt.Fprintf(w, "dledger %s\nrevision: %s\n", b.Version, rev)
	if b.Time != "" {
		fmt.Fprintf(w, "commit time: %s\n", b.Time)
	}
	fmt.Fprintf(w, "go: %s %s/%s\n", b.GoVersion, runtime.GOOS, runtime.GOARCH)
}
