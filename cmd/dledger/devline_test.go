package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// dledger dev prints a role change as one line, and a listener's missed marker as what it is,
// not as a role change (its Role is the zero value, which would read as a stop).
func TestDevRoleLine(t *testing.T) {
	start := time.Unix(100, 0)
	got := devRoleLine("n1", start, dledger.RoleEvent{Seq: 2, Term: 3, Role: protocol.LEADER, LeaderID: "n1", At: start.Add(1500 * time.Millisecond)})
	if want := "   1.500s  n1  LEADER    term=3 leader=n1"; got != want {
		t.Errorf("role line %q, want %q", got, want)
	}
	got = devRoleLine("n1", start, dledger.RoleEvent{Missed: 4})
	if !strings.Contains(got, "missed 4 role events") || strings.Contains(got, "stopped") || strings.Contains(got, "term=") {
		t.Errorf("marker line %q", got)
	}
}
