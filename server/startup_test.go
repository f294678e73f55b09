package server

import (
	"context"
	"testing"
	"time"
)

// Start tells the elector that it starts (dledger.Elector.Started): the start-up order's wait
// counts from Start, not from New (docs/protocol.md 7.11). A member of rank 2 built a while
// before it starts still waits its two slots after the start; counted from New, its wait was
// over by then and it probed at once.
func TestStartCountsTheStartUpOrderFromTheStart(t *testing.T) {
	c := soloConfig(t)
	c.SelfID, c.Peers = "n2", peersString(freePorts(t, 3)) // n0 and n1 never start: nobody asks n2
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	slot := s.elector.Config().SuccessionSlot()
	if slot <= 0 {
		t.Fatalf("succession slot %v", slot)
	}
	time.Sleep(2 * slot) // the test's input, not a wait for an event: a start two slots after the build
	start := time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if next := s.elector.NextPassAt(); next.Before(start.Add(2 * slot)) {
		t.Fatalf("rank 2 started at %v: first probe at %v, before its wait of two slots (%v) from the start",
			start.Format("15:04:05.000"), next.Format("15:04:05.000"), 2*slot)
	}
}
