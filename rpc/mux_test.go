package rpc

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// memberHandler answers as member self of group: a test tells from the answer which local
// member served a request.
type memberHandler struct {
	fakeHandler
	group, self string
	hb          atomic.Int32
}

func (h *memberHandler) HandleHeartBeat(req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	h.hb.Add(1)
	return &protocol.HeartBeatResponse{Header: protocol.Header{Group: h.group, LocalID: h.self, RemoteID: req.LocalID,
		Term: req.Term, Code: protocol.CodeSuccess}}
}

func (h *memberHandler) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	return &protocol.MetadataResponse{Header: protocol.Header{Group: h.group, LocalID: h.self, Code: protocol.CodeSuccess}}
}

// hostMux routes three local members: "a" and "b" of group "g1" and "a" of group "g2", each
// accepting "n1".
func hostMux(t *testing.T) (*Mux, map[[2]string]*memberHandler) {
	mux := NewMux()
	hs := map[[2]string]*memberHandler{}
	for _, k := range [][2]string{{"g1", "a"}, {"g1", "b"}, {"g2", "a"}} {
		h := &memberHandler{group: k[0], self: k[1]}
		if err := mux.Add(k[0], k[1], []string{"n1", k[1]}, h); err != nil {
			t.Fatal(err)
		}
		hs[k] = h
	}
	if err := mux.Add("g1", "a", nil, &memberHandler{}); err == nil {
		t.Fatal("a second route for (g1, a) was accepted")
	}
	return mux, hs
}

func muxHeartBeat(t *testing.T, cl *Client, group, to string, term int64) (*protocol.HeartBeatResponse, error) {
	t.Helper()
	return callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
		cl.SendHeartBeat(to, &protocol.HeartBeatRequest{Header: protocol.Header{Group: group, RemoteID: to, LocalID: "n1",
			LeaderID: "n1", Term: term}}, done)
	})
}

// TestMuxRoutesByGroupAndMember: one keyed server serves three members of two groups; members
// of each group authenticate with the host's key (the handshake finds their group) and each
// request reaches the member its header names, with one handshake per member pair as today.
func TestMuxRoutesByGroupAndMember(t *testing.T) {
	keys := newKeys(t)
	mux, hs := hostMux(t)
	var reasons reasonCounter
	s := startServer(t, mux, func(o *ServerOptions) {
		o.Auth = Auth{Keys: keys}
		o.OnAuthFailure = reasons.add
	})
	for i, k := range [][2]string{{"g1", "a"}, {"g1", "b"}, {"g2", "a"}} {
		cl := newClient(t, map[string]string{k[1]: s.Addr()}, func(o *ClientOptions) {
			o.Auth = Auth{Keys: keys, Group: k[0], SelfID: "n1"}
		})
		resp, err := muxHeartBeat(t, cl, k[0], k[1], int64(i+1))
		if err != nil || resp.Code != protocol.CodeSuccess || resp.Group != k[0] || resp.LocalID != k[1] || resp.Term != int64(i+1) {
			t.Fatalf("%v: %+v, %v", k, resp, err)
		}
	}
	for k, h := range hs {
		if n := h.hb.Load(); n != 1 {
			t.Fatalf("%v served %d heartbeats, want 1", k, n)
		}
	}
	// A group the host does not serve fails the handshake as a wrong key would; a member
	// of a served group that is not here is the wrong peer; a stranger is unknown.
	for _, tc := range []struct {
		group, self, to, reason string
	}{{"g3", "n1", "a", "bad_key"}, {"g2", "n1", "b", "wrong_peer"}, {"g1", "n7", "a", "unknown_member"}} {
		before := reasons.get(tc.reason)
		cl, err := NewClient(ClientOptions{Peers: map[string]string{tc.to: s.Addr()}, Auth: Auth{Keys: keys, Group: tc.group, SelfID: tc.self},
			ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, tc.reason+" counted", func() bool { return reasons.get(tc.reason) > before })
		if cl.Connected(tc.to) {
			t.Fatalf("%+v: connected", tc)
		}
		_ = cl.Close()
	}
}

// TestMuxUnknownKeepsConnection: a request for a group or a member this host does not serve
// (never served, or removed) is answered with the code alone, and the same connection then
// serves a request for a member that is here.
func TestMuxUnknownKeepsConnection(t *testing.T) {
	mux, hs := hostMux(t)
	s := startServer(t, mux, nil)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	call := func(id uint64, group, to string) protocol.HeartBeatResponse {
		t.Helper()
		req := hbRequest(int64(id))
		req.Group, req.RemoteID, req.LocalID = group, to, "n1"
		if _, err := conn.Write(frameOf(hbReqCase, id, req)); err != nil {
			t.Fatal(err)
		}
		body, err := readFrame(conn)
		if err != nil {
			t.Fatalf("no answer to %s/%s: %v", group, to, err)
		}
		var c frameDecoder
		var resp response
		if err := c.decodeResponse(body, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.hb
	}
	if r := call(1, "g9", "a"); r.Code != protocol.CodeUnknownGroup || r.LocalID != "" || r.Term != 0 {
		t.Fatalf("unknown group: %+v", r)
	}
	if r := call(2, "g2", "b"); r.Code != protocol.CodeUnknownMember || r.LocalID != "" || r.Term != 0 {
		t.Fatalf("unknown member: %+v", r)
	}
	if r := call(3, "g2", "a"); r.Code != protocol.CodeSuccess || r.LocalID != "a" || r.Group != "g2" {
		t.Fatalf("served member: %+v", r)
	}
	mux.Remove("g2", "a")
	if r := call(4, "g2", "a"); r.Code != protocol.CodeUnknownGroup {
		t.Fatalf("removed group: %+v", r)
	}
	mux.Remove("g1", "b")
	if r := call(5, "g1", "b"); r.Code != protocol.CodeUnknownMember {
		t.Fatalf("removed member: %+v", r)
	}
	if r := call(6, "g1", "a"); r.Code != protocol.CodeSuccess || r.LocalID != "a" {
		t.Fatalf("after the removals: %+v", r)
	}
	if n := hs[[2]string{"g2", "a"}].hb.Load(); n != 1 {
		t.Fatalf("g2/a served %d heartbeats, want 1 (none after its removal)", n)
	}
}

// TestMuxRemoveKeepsTheGroupsOtherMembers: a group's routes are a slice (issue 29's memory
// per member); removing one member leaves the others routed, removing the last forgets the
// group, and SetPeers replaces the route of the member it names only.
func TestMuxRemoveKeepsTheGroupsOtherMembers(t *testing.T) {
	mux, hs := hostMux(t)
	if err := mux.SetPeers("g1", "b", map[string]string{"b": "", "n2": "h2"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := routeTo(mux.groups["g1"], "b").peer("n2"); !ok {
		t.Fatal("SetPeers did not replace b's peers")
	}
	if _, ok := routeTo(mux.groups["g1"], "a").peer("n2"); ok {
		t.Fatal("SetPeers of b changed a's peers")
	}
	mux.Remove("g1", "a")
	mux.Remove("g1", "a") // twice: nothing to remove
	for _, tc := range []struct {
		group, self string
		code        protocol.ResponseCode
	}{{"g1", "a", protocol.CodeUnknownMember}, {"g1", "b", 0}, {"g2", "a", 0}} {
		h, code := mux.lookup(tc.group, tc.self)
		if code != tc.code || (code == 0 && h != hs[[2]string{tc.group, tc.self}]) {
			t.Fatalf("(%s, %s) after removing (g1, a): code %v, handler %v", tc.group, tc.self, code, h)
		}
	}
	mux.Remove("g1", "b")
	if _, code := mux.lookup("g1", "b"); code != protocol.CodeUnknownGroup {
		t.Fatalf("g1 with no member left: code %v, want UNKNOWN_GROUP", code)
	}
	if _, code := mux.lookup("g2", "a"); code != 0 {
		t.Fatalf("(g2, a) after g1 was emptied: code %v", code)
	}
}

// TestMuxKeepsTheMembersPeerList: a host's members share their peers list (one per peers
// string), and the mux keeps it as given instead of a copy of its own (issue 29: some 80
// bytes of each of a host's thousands of routes); the route reads its own host id and its
// peers' from it, never itself as a peer, and a list without its own entry gives it none.
func TestMuxKeepsTheMembersPeerList(t *testing.T) {
	if n := unsafe.Sizeof(route{}); n > 64 {
		t.Errorf("a route is %d bytes, past the 64-byte allocation class", n)
	}
	mux := NewMux()
	peers := []memberstate.Peer{{ID: "n0", Addr: "h0:1"}, {ID: "n1", Addr: "h1:1"}, {ID: "n2", Addr: "h2:1"}}
	if err := mux.AddMemberPeers("g", "n1", peers, &memberHandler{group: "g", self: "n1"}); err != nil {
		t.Fatal(err)
	}
	r := routeTo(mux.groups["g"], "n1")
	if &r.peers[0] != &peers[0] {
		t.Error("the mux copied the member's peers list")
	}
	if r.self() != "h1:1" || mux.selfHosts["h1:1"] != 1 {
		t.Errorf("own host id %q, counted %d", r.self(), mux.selfHosts["h1:1"])
	}
	for id, want := range map[string]string{"n0": "h0:1", "n2": "h2:1", "n1": "", "n9": ""} {
		if host, ok := r.peer(id); host != want || ok != (want != "") {
			t.Errorf("peer %s: %q %v, want %q", id, host, ok, want)
		}
	}
	if err := mux.SetMemberPeers("g", "n1", peers[:2]); err != nil {
		t.Fatal(err)
	}
	if _, ok := routeTo(mux.groups["g"], "n1").peer("n2"); ok {
		t.Error("n2 still a peer after SetMemberPeers left it out")
	}
	if err := mux.SetMemberPeers("g", "n1", peers[:1]); err == nil {
		t.Error("SetMemberPeers without the member's own entry (its address moved to none) succeeded")
	}
	mux.Remove("g", "n1")
	if len(mux.selfHosts) != 0 {
		t.Errorf("own host ids still counted after the last route went: %v", mux.selfHosts)
	}
}
