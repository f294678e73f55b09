package dledger

import (
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestOnlyALeaderKeepsAPeersTable: the leader's table of its followers (peerStatus) exists
// while the member leads and is dropped when it steps down, so a host's followers, two thirds
// of its members in a host of thousands of groups, keep none (issue 29, docs/design.md "What a
// member costs, measured again"). A new leadership starts from an empty table.
func TestOnlyALeaderKeepsAPeersTable(t *testing.T) {
	u := newUnit(t, 3, nil)
	table := func() []peerStatus {
		u.e.mu.Lock()
		defer u.e.mu.Unlock()
		return u.e.peers
	}
	if p := table(); p != nil {
		t.Fatalf("a new member (candidate) keeps a table of %d peers", len(p))
	}
	u.makeLeader()
	if p := table(); len(p) != 3 {
		t.Fatalf("the leader's table has %d entries, want 3", len(p))
	}
	u.e.mu.Lock()
	u.e.peers[1].alive, u.e.peers[1].known = true, true
	u.e.mu.Unlock()
	term := u.ms.CurrTerm()
	if r := u.e.HandleHeartBeat(hbReq("n1", term+1)); r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat at a higher term answered %v", r.Code)
	}
	if st := u.e.Status(); st.Role != protocol.FOLLOWER {
		t.Fatalf("role %v after a higher term's heartbeat, want FOLLOWER", st.Role)
	}
	if p := table(); p != nil {
		t.Fatalf("a follower keeps a table of %d peers", len(p))
	}
	u.clock.Advance(10 * time.Second) // the leader falls silent: n0 campaigns again
	u.e.Tick()
	u.makeLeader()
	if p := table(); len(p) != 3 || p[1].alive || p[1].known {
		t.Fatalf("a new leadership's table is %+v, want 3 empty entries", p)
	}
}

// TestEventsReadyChannelMadeWhenAsked: an elector driven by SetEventsAlarm (a host's
// members) keeps no EventsReady channel (issue 29); the first EventsReady returns one already
// signalled, as the starting role's event left it, and later events signal it again.
func TestEventsReadyChannelMadeWhenAsked(t *testing.T) {
	u := newUnit(t, 3, nil)
	alarms := 0
	u.e.SetEventsAlarm(func() { alarms++ })
	u.makeLeader()
	u.e.mu.Lock()
	ch := u.e.notify
	u.e.mu.Unlock()
	if ch != nil || alarms == 0 {
		t.Fatalf("driven by an alarm (%d alarms): the elector made a notify channel", alarms)
	}
	ready := u.e.EventsReady()
	select {
	case <-ready:
	default:
		t.Fatal("the first EventsReady is not signalled, though events are queued")
	}
	if got := u.e.EventsReady(); got != ready {
		t.Fatal("EventsReady returned a second channel")
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", u.ms.CurrTerm()+1)); r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat at a higher term answered %v", r.Code)
	}
	select {
	case <-ready:
	default:
		t.Fatal("a role event after the first EventsReady did not signal it")
	}
}

// TestElectorFitsItsAllocationClass: a host of 10,000 groups keeps 10,000 Electors, and the
// Go allocator rounds each up to its size class: one byte past 1,024 costs 128 more a member
// (the 1,152-byte class). The detector's samples are behind a pointer, a leader's quorum
// buffers are on the stack, and emit keeps 40 bytes of the last event, for this (issue 29).
func TestElectorFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(Elector{}); n > 1024 {
		t.Fatalf("an Elector is %d bytes, past the 1,024-byte allocation class", n)
	}
}

// TestTableMemberKeepsNoSamples: a member with a host's liveness table never adapts, so it
// keeps no detector samples however many heartbeats it hears; a member with a process of its
// own makes its samples with its first heartbeat.
func TestTableMemberKeepsNoSamples(t *testing.T) {
	kept := func(u *unit) *detLinks {
		u.e.mu.Lock()
		defer u.e.mu.Unlock()
		return u.e.det.links
	}
	q, live := newQuietUnit(t, 3)
	live.set(q.clock.Now(), q.clock.Now(), true)
	own := newUnit(t, 3, nil)
	for i := range 5 {
		for _, u := range []*unit{q, own} {
			if r := u.e.HandleHeartBeat(hbReq("n1", 1)); r.Code != protocol.CodeSuccess {
				t.Fatalf("heartbeat %d answered %v", i, r.Code)
			}
			u.clock.Advance(50 * time.Millisecond)
			u.e.Tick()
		}
	}
	if l := kept(q); l != nil {
		t.Fatalf("a table member following n1 keeps samples %+v", l)
	}
	if l := kept(own); l == nil || l.arrivals == nil {
		t.Fatal("a member of its own process keeps no heartbeat gaps after five heartbeats")
	}
}
