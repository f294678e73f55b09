package rpc

import (
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// A member added to the group while it runs (issue 31) can connect once the server accepts
// its id, and not before; a member removed from the accepted ids cannot open a new connection.
func TestServerSetMembersAdmitsAndRefuses(t *testing.T) {
	keys := newKeys(t)
	var reasons reasonCounter
	s := keyedServer(t, &fakeHandler{}, keys, &reasons, nil) // accepts n1 only
	dial := func(id string) *Client { return dialAs(t, testSelf, s.Addr(), keyedAuth(keys, id)) }
	n3 := dial("n3")
	eventually(t, "n3 refused as unknown", func() bool { return reasons.get(secure.ReasonUnknownMember) > 0 })
	if n3.Connected(testSelf) {
		t.Fatal("n3 connected before it was a member")
	}
	s.SetMembers([]string{"n1", "n3"})
	eventually(t, "n3 to connect once a member", func() bool { return n3.Connected(testSelf) })
	if resp, err := heartBeatAs(t, n3, "n3", 1); err != nil || resp.Code != protocol.CodeSuccess {
		t.Fatalf("n3's heartbeat: %+v, %v", resp, err)
	}
	s.SetMembers([]string{"n3"})
	before := reasons.get(secure.ReasonUnknownMember)
	n1 := dial("n1")
	eventually(t, "n1 refused once removed", func() bool { return reasons.get(secure.ReasonUnknownMember) > before })
	if n1.Connected(testSelf) {
		t.Fatal("n1 connected after it was removed")
	}
	s.SetMembers([]string{"n1", testSelf}) // the server's own id is never accepted
	if (*s.members.Load())[testSelf] {
		t.Fatal("the server accepts its own id")
	}
}

// Mux.SetPeers: a member of a hosted group accepts a peer added at run time, refuses one
// removed, and refuses a change of its own address; an unknown member is an error.
func TestMuxSetPeers(t *testing.T) {
	keys := newKeys(t)
	mux, _ := hostMux(t) // (g1, a) accepts n1
	var reasons reasonCounter
	s := startServer(t, mux, func(o *ServerOptions) {
		o.Auth = Auth{Keys: keys}
		o.OnAuthFailure = reasons.add
	})
	n5 := dialAs(t, "a", s.Addr(), Auth{Keys: keys, Group: "g1", SelfID: "n5"})
	eventually(t, "n5 refused", func() bool { return reasons.get(secure.ReasonUnknownMember) > 0 })
	if err := mux.SetPeers("g1", "a", map[string]string{"a": "", "n1": "", "n5": ""}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n5 to connect once a peer", func() bool { return n5.Connected("a") })
	if err := mux.SetPeers("g1", "a", map[string]string{"a": "elsewhere:1"}); err == nil {
		t.Fatal("a member's own address changed while it runs")
	}
	if err := mux.SetPeers("g9", "a", map[string]string{}); err == nil {
		t.Fatal("SetPeers of a member not served succeeded")
	}
	if err := mux.SetPeers("g1", "a", map[string]string{"a": ""}); err != nil {
		t.Fatal(err)
	}
	before := reasons.get(secure.ReasonUnknownMember)
	n1 := dialAs(t, "a", s.Addr(), Auth{Keys: keys, Group: "g1", SelfID: "n1"})
	eventually(t, "n1 refused once removed", func() bool { return reasons.get(secure.ReasonUnknownMember) > before })
	if n1.Connected("a") {
		t.Fatal("n1 connected after it was removed")
	}
}

// dialAs is a client of peer id at addr with auth that keeps redialling quickly, without
// waiting for its connection (newClient does): the server may refuse it.
func dialAs(t *testing.T, id, addr string, auth Auth) *Client {
	cl, err := NewClient(ClientOptions{Peers: map[string]string{id: addr}, Auth: auth,
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}
