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
// Go allocator rounds each up to its size class: one byte past 896 costs 128 more a member
// (the 1,024-byte class). The detector's samples are behind a pointer, a leader's quorum
// buffers are on the stack, emit keeps 40 bytes of the last event, and a leader's rounds and
// clocks are behind a pointer made when it first leads (leading), for this (issue 29).
func TestElectorFitsItsAllocationClass(t *testing.T) {
	if n := unsafe.Sizeof(Elector{}); n > 896 {
		t.Fatalf("an Elector is %d bytes, past the 896-byte allocation class", n)
	}
}

// TestOnlyAMemberThatLedKeepsLeaderState: a member that follows and campaigns keeps no
// leader state (two thirds of a host's members never lead); its first leadership makes it, set
// as becomeLeader always set those fields, and a later leadership starts it afresh.
func TestOnlyAMemberThatLedKeepsLeaderState(t *testing.T) {
	u := newUnit(t, 3, nil)
	lead := func() *leading {
		u.e.mu.Lock()
		defer u.e.mu.Unlock()
		return u.e.lead
	}
	if r := u.e.HandleHeartBeat(hbReq("n1", 1)); r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat answered %v", r.Code)
	}
	u.e.Tick()
	u.clock.Advance(10 * time.Second) // the leader falls silent: a candidate
	u.e.Tick()
	if st := u.e.Status(); st.Role != protocol.CANDIDATE {
		t.Fatalf("role %v, want CANDIDATE", st.Role)
	}
	if l := lead(); l != nil {
		t.Fatalf("a member that never led keeps leader state %+v", l)
	}
	u.makeLeader()
	first := lead()
	if first == nil || !first.leaderSince.Equal(u.clock.Now()) || first.hb == nil || first.hb.term != u.ms.CurrTerm() {
		t.Fatalf("a new leader's state is %+v, want its election now", first)
	}
	term := u.ms.CurrTerm()
	if r := u.e.HandleHeartBeat(hbReq("n1", term+1)); r.Code != protocol.CodeSuccess {
		t.Fatalf("heartbeat at a higher term answered %v", r.Code)
	}
	u.clock.Advance(10 * time.Second)
	u.e.Tick()
	u.makeLeader()
	if l := lead(); l == nil || !l.leaderSince.Equal(u.clock.Now()) || l.hb == nil || l.hb.term != u.ms.CurrTerm() {
		t.Fatalf("a second leadership's state is %+v, want its own election and round", l)
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
