package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestAMembersTransportAndEventsAllocateNothing: a host's member keeps no transport value and
// no method value of its own (its elector's Transport is the member, converted; its events go
// to its dispatcher directly), and publishing an event makes no slice for it (issue 29,
// docs/design.md "What a member costs, a seventh time").
func TestAMembersTransportAndEventsAllocateNothing(t *testing.T) {
	ports := freePorts(t, 1)
	h := newTestHost(t, ports[0], t.TempDir())
	peers := fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:1;n2-127.0.0.1:2", ports[0])
	s, err := h.AddGroup(Config{Group: "g", SelfID: "n0", Peers: peers, Election: fastTimings()}) // not started: no events of its own
	if err != nil {
		t.Fatal(err)
	}
	if s.deliver != nil {
		t.Error("a member keeps a func of its own to deliver its events")
	}
	var tr dledger.Transport
	if a := testing.AllocsPerRun(100, func() { tr = s.electorTransport() }); a != 0 || tr == nil {
		t.Errorf("the elector's transport is %v allocations", a)
	}
	ev := dledger.RoleEvent{Group: "g", Term: 1 << 40, Role: protocol.FOLLOWER, LeaderID: "n1"}
	evs := []dledger.RoleEvent{ev} // as the member's driver hands them over
	if a := testing.AllocsPerRun(100, func() { s.publish(evs...) }); a != 0 {
		t.Errorf("publishing an event made %v allocations", a)
	}
	if last, ok := s.dispatch.Last(); !ok || last != ev {
		t.Errorf("the dispatcher's last event %+v (%v), want %+v", last, ok, ev)
	}
}

// TestMembershipPeersMadeOnce: the members a member may send to or hear from (committed and
// pending configurations, and Config.Peers while it joins), each once, in one allocation at
// their number (issue 29: a list grown by appends and a map of the ids seen were a cold start's
// garbage).
func TestMembershipPeersMadeOnce(t *testing.T) {
	p := func(id string) memberstate.Peer { return memberstate.Peer{ID: id, Addr: id + ":1"} }
	initial := []memberstate.Peer{p("n0"), p("n1"), p("n9")}
	committed := Membership{Voters: []memberstate.Peer{p("n0"), p("n1"), p("n2")}, NonVoters: []memberstate.Peer{p("n3")}}
	pending := committed
	pending.Pending = &dledger.Configuration{Voters: []memberstate.Peer{p("n0"), p("n1"), p("n2"), p("n3")}, NonVoters: []memberstate.Peer{p("n4")}}
	joining := Membership{Joining: true}
	for _, c := range []struct {
		name string
		m    Membership
		want []memberstate.Peer
	}{
		{"committed", committed, []memberstate.Peer{p("n0"), p("n1"), p("n2"), p("n3")}},
		{"pending", pending, []memberstate.Peer{p("n0"), p("n1"), p("n2"), p("n3"), p("n4")}},
		{"joining", joining, initial},
		{"none", Membership{}, initial},
	} {
		var got []memberstate.Peer
		if a := testing.AllocsPerRun(10, func() { got = membershipPeers(c.m, initial) }); a != 1 {
			t.Errorf("%s: %v allocations", c.name, a)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := membershipPeers(Membership{}, nil); got != nil {
		t.Errorf("no members: %v", got)
	}
}
