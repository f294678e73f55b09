package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLabBadFlags: a bad flag is one line on stderr and exit status 2, before any process is
// started; a missing or unknown command prints the usage and exits 2.
func TestLabBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"calm", "--members", "2"},
		{"calm", "--scenario", "flap-everything"},
		{"calm", "--duration", "10ms"},
		{"calm", "--binary", "/nonexistent/dledger"},
		{"calm", "extra"},
		{"compare", "--systems", "consul"},
		{"compare", "--trials", "0"},
		{"compare", "--binary", "/nonexistent/dledger"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		oneLine := len(args) > 1 || (len(args) == 1 && (args[0] == "calm" || args[0] == "compare"))
		if code != 2 || msg == "" || (oneLine && strings.Contains(msg, "\n")) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one error line", args, code, msg)
		}
	}
}

// TestLabHelp: -h prints the usage and exits 0.
func TestLabHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"calm", "-h"}, {"compare", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || stdout.Len()+stderr.Len() == 0 {
			t.Errorf("%v: exit %d, no usage", args, code)
		}
	}
}
