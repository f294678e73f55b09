package dledger

import (
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestElectorKeepsNoLoggerOfItsOwn: an elector keeps the logger its Options gave it, not a
// clone with its group and self (some 300 bytes a member of a host of thousands; issue 29),
// and adds them at each line written, in front of the line's own fields as before; a line at
// a level the logger leaves out builds nothing.
func TestElectorKeepsNoLoggerOfItsOwn(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	u := newUnit(t, 3, nil)
	var err error
	u.e, err = newElector(u.cfg, u.ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	u.e.startUp.hadLeader = true
	if u.e.log != log {
		t.Fatal("the elector keeps a logger of its own, not the one it was given")
	}
	if n := testing.AllocsPerRun(100, func() { u.e.logAt(zap.DebugLevel) }); n != 0 {
		t.Fatalf("a debug line on an info logger allocates %v times", n)
	}
	u.makeLeader()
	lines := logs.FilterMessage(EventBecomesLeader).All()
	if len(lines) != 1 {
		t.Fatalf("%d %q lines, want 1: %v", len(lines), EventBecomesLeader, logs.All())
	}
	var keys []string
	for _, f := range lines[0].Context {
		keys = append(keys, f.Key)
	}
	if want := []string{"group", "self", "term", "role"}; !slices.Equal(keys, want) {
		t.Fatalf("line fields %v, want %v", keys, want)
	}
	if m := lines[0].ContextMap(); m["group"] != "g" || m["self"] != "n0" {
		t.Fatalf("line names group %v self %v, want g and n0", m["group"], m["self"])
	}
}
