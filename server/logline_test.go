package server

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestMemberKeepsNoLoggerOfItsOwn: a member keeps the process's logger, not a clone with
// its group and self (with the elector's, some 300 bytes a member of a host of thousands;
// issue 29), and its lines and its elector's still carry both.
func TestMemberKeepsNoLoggerOfItsOwn(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	s, err := New(soloConfig(t), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	if s.log != log {
		t.Fatal("the member keeps a logger of its own, not the process's")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s, protocol.LEADER)
	for _, msg := range []string{dledger.EventMemberStarted, dledger.EventBecomesLeader} {
		lines := logs.FilterMessage(msg).All()
		if len(lines) == 0 {
			t.Fatalf("no %q line: %v", msg, logs.All())
		}
		if m := lines[0].ContextMap(); m["group"] != "g" || m["self"] != "n0" {
			t.Fatalf("%q names group %v self %v, want g and n0", msg, m["group"], m["self"])
		}
	}
}
