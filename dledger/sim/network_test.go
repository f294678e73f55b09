package sim

import (
	"errors"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// A call to a member that is down fails inside Send, as rpc.Client fails a call to a peer it
// holds no connection to (rpc.ErrPeerDown): production's commonest failure path runs in the
// campaign too, with the answer's entry point inside the elector's delivery. A call behind a
// cut link is not answered inside Send: the sender cannot know.
func TestCallToADownMemberFailsInsideSend(t *testing.T) {
	c := newTestCluster(t, ClusterOptions{Config: dledger.DefaultConfig()})
	s := c.s
	n0, n1, n2 := s.members[0], s.members[1], s.members[2]
	s.crash(n1)
	s.cutLink(n0, n2)
	ep := &endpoint{s: s, m: n0, inc: n0.inc}
	req := func(to string) *protocol.VoteRequest {
		return &protocol.VoteRequest{Header: protocol.Header{Group: group, RemoteID: to, LocalID: "n0", LeaderID: "n0", Term: 1}}
	}
	var gotErr error
	answered := false
	ep.SendVote("n1", req("n1"), func(_ *protocol.VoteResponse, err error) { answered, gotErr = true, err })
	if !answered || !errors.Is(gotErr, errPeerDown) {
		t.Fatalf("a call to a down member: answered inside Send %v, error %v; want errPeerDown inside Send", answered, gotErr)
	}
	answered = false
	ep.SendVote("n2", req("n2"), func(*protocol.VoteResponse, error) { answered = true })
	if answered {
		t.Fatal("a call behind a cut link was answered inside Send")
	}
}
