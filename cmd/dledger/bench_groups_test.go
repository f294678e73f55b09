package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBenchGroupsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--groups", "0"},
		{"--runs", "0"},
		{"--idle", "10ms"},
		{"--profile", "wan"},
		{"--log-level", "warn"},
		{"--binary", "/nonexistent/dledger"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench", "groups"}, args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || msg == "" || strings.Contains(msg, "\n") {
			t.Errorf("bench groups %v: exit %d, stderr %q; want exit 2 and one error line", args, code, msg)
		}
	}
}
