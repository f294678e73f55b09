package liveness

import (
	"testing"
	"time"
)

// TestChangedDoesNotWaitForReaders: a role change records its epoch while members' passes read
// the table (Peer, Window, StalledAt hold its lock for reading). As a writer of that lock, each
// of the thousands of role changes of a host crash's elections waited for every pass reading the
// table, and made every later pass wait for it: on one processor, a convoy. The reader here is
// the test itself, holding the read lock as a pass does in Peer.
func TestChangedDoesNotWaitForReaders(t *testing.T) {
	p := newPair(t, 1, 1)
	m := p.a.For("g1", "a")
	p.a.mu.RLock() // a pass in Peer
	done := make(chan uint64, 1)
	go func() { done <- m.Changed() }()
	select {
	case ep := <-done:
		p.a.mu.RUnlock()
		if ep == 0 {
			t.Fatal("no epoch")
		}
	case <-time.After(time.Minute): // not a speed check: without the change it never returns
		p.a.mu.RUnlock()
		<-done
		t.Fatal("Changed waited for a reader of the table")
	}
	// The change is pending for B and goes in the next frame, as before.
	out := p.a.Due(t0)
	if len(out) != 1 || len(out[0].Frame.Changes) != 1 || out[0].Frame.Changes[0].Group != "g1" {
		t.Fatalf("frames %+v: want g1/a's change to B", out)
	}
	if v, _ := p.a.Host("B", t0); v.Unacked != 1 {
		t.Fatalf("unacked %d, want 1", v.Unacked)
	}
}

// TestMemberForgottenWhenRemoved: a Member keeps the table's entry it was made with (no lookup
// per query), and still finds nothing once its member is removed, and the entry of a member
// added again under the same name once it is.
func TestMemberForgottenWhenRemoved(t *testing.T) {
	p := newPair(t, 1, 1)
	p.both(t0) // A knows B's incarnation: a is vouched for b from here
	m := p.a.For("g1", "a")
	since := t0
	if _, _, ok := m.Peer("b", 1, since, t0); !ok {
		t.Fatal("b not vouched for while registered")
	}
	p.a.RemoveMember("g1", "a")
	if heard, _, ok := m.Peer("b", 1, since, t0); ok || !heard.IsZero() {
		t.Fatalf("a removed member still answered: heard %v ok %v", heard, ok)
	}
	if w := m.Window("b"); w != 0 {
		t.Fatalf("a removed member still has a window: %v", w)
	}
	must(t, p.a.AddMember("g1", "a", map[string]string{"a": "A", "b": "B"}, func() {}))
	if _, _, ok := m.Peer("b", 1, since, t0); !ok {
		t.Fatal("the old Member did not find the member added again")
	}
	ep := m.Changed()
	if ep == 0 {
		t.Fatal("no epoch for the member added again")
	}
}
