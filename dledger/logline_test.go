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

// TestLeaderGoneIsOneLine: a follower told that its leader's process is gone writes one info
// line, "becomes candidate", naming the lost leader and its succession delay. It wrote two
// before ("leader gone: campaigns after its succession delay" after it), through a logger
// cloned for the second: each survivor of a 10,000-group crash writes one for each of 3,334
// groups, and logging fell from 9 to 7 % of the survivors' CPU in the crash without the second
// (BENCHMARKS.md, "Fifth session").
func TestLeaderGoneIsOneLine(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	u := newUnit(t, 3, nil)
	var err error
	u.e, err = newElector(u.cfg, u.ms, Options{Clock: u.clock, Rand: zeroRand, Transport: u.tr, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	u.setTerm(4, "n1")
	hb := hbReq("n1", 4)
	hb.Successors = "n2;n0"
	u.e.HandleHeartBeat(hb)
	before := logs.Len()
	u.e.PeerGone("n1")
	lines := logs.All()[before:]
	if len(lines) != 1 || lines[0].Message != EventBecomesCandidate {
		t.Fatalf("lines for the leader's death: %v, want one %q", lines, EventBecomesCandidate)
	}
	m := lines[0].ContextMap()
	if m["lost"] != "n1" || m["delay"] != u.cfg.SuccessionSlot() || m["seenTerm"] != int64(4) {
		t.Fatalf("line fields %v, want lost n1, delay %v (second successor), seenTerm 4", m, u.cfg.SuccessionSlot())
	}
	if got := u.e.NextPassAt().Sub(u.clock.Now()); got != u.cfg.SuccessionSlot() {
		t.Fatalf("next pass in %v, the line says %v", got, m["delay"])
	}
}
