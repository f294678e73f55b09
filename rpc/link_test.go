package rpc

import (
	"net"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

const linkHostA, linkHostB = "10.0.0.1:20911", "10.0.0.2:20911"

// linkMux routes members "a" and "b" of groups "g1" and "g2", on host linkHostB; their peer
// "n1" is on linkHostA and "n2" on another host.
func linkMux(t *testing.T) (*Mux, map[[2]string]*memberHandler) {
	mux := NewMux()
	mux.SetHost(linkHostB)
	hs := map[[2]string]*memberHandler{}
	for _, k := range [][2]string{{"g1", "a"}, {"g1", "b"}, {"g2", "a"}} {
		h := &memberHandler{group: k[0], self: k[1]}
		peers := map[string]string{"n1": linkHostA, "n2": "10.0.0.3:20911", k[1]: linkHostB}
		if err := mux.AddMember(k[0], k[1], peers, h); err != nil {
			t.Fatal(err)
		}
		hs[k] = h
	}
	return mux, hs
}

// linkHeartBeat sends a heartbeat of group from member from to member to over a host link.
func linkHeartBeat(t *testing.T, cl *Client, host, group, from, to string) (*protocol.HeartBeatResponse, error) {
	t.Helper()
	return callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
		cl.Caller(Timeouts{Call: time.Second}).SendHeartBeat(host, &protocol.HeartBeatRequest{Header: protocol.Header{
			Group: group, RemoteID: to, LocalID: from, LeaderID: from, Term: 1}}, done)
	})
}

// TestLinkCarriesEveryGroup: one host link, authenticated once as host A, carries the requests
// of every group to every member served on host B, each routed by its header; the server
// accepted one connection and one handshake for all of them.
func TestLinkCarriesEveryGroup(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		mux, hs := linkMux(t)
		var reasons reasonCounter
		auth := Auth{Insecure: true}
		if keyed {
			auth = Auth{Keys: newKeys(t)}
		}
		s := startServer(t, mux, func(o *ServerOptions) { o.Auth = auth; o.OnAuthFailure = reasons.add })
		cl := newClient(t, map[string]string{linkHostB: s.Addr()}, func(o *ClientOptions) {
			o.Auth = Auth{Keys: auth.Keys, Insecure: auth.Insecure, Host: linkHostA}
		})
		for k := range hs {
			resp, err := linkHeartBeat(t, cl, linkHostB, k[0], "n1", k[1])
			if err != nil || resp.Code != protocol.CodeSuccess || resp.Group != k[0] || resp.LocalID != k[1] {
				t.Fatalf("keyed %v, %v: %+v, %v", keyed, k, resp, err)
			}
		}
		// A group not served is answered with the code, on the same connection.
		if resp, err := linkHeartBeat(t, cl, linkHostB, "g9", "n1", "a"); err != nil || resp.Code != protocol.CodeUnknownGroup {
			t.Fatalf("unknown group: %+v %v", resp, err)
		}
		if n := s.conns.Load(); n != 1 {
			t.Fatalf("keyed %v: %d connections, want one host link", keyed, n)
		}
		if st := cl.Stats(); st.AuthFailures != 0 || st.BadFrames != 0 {
			t.Fatalf("client: %+v", st)
		}
		if n := s.Stats().AuthFailures; n != 0 {
			t.Fatalf("server auth failures %d", n)
		}
		stopServer(t, s)
	}
}

// TestLinkWrongMember: on a host link authenticated as host A, a request from a member whose
// peers entry names another host (n2), from a host-level sender other than A, or from an id
// that is no member closes the connection as wrong_member; a request from n1 passes.
func TestLinkWrongMember(t *testing.T) {
	keys := newKeys(t)
	mux, _ := linkMux(t)
	var reasons reasonCounter
	s := startServer(t, mux, func(o *ServerOptions) { o.Auth = Auth{Keys: keys}; o.OnAuthFailure = reasons.add })
	for i, h := range []protocol.Header{
		{Group: "g1", RemoteID: "a", LocalID: "n2"},
		{Group: "g1", RemoteID: "a", LocalID: "zz"},
		{Group: "g1", RemoteID: "a", LocalID: "a"}, // a member of B claimed from A
		{RemoteID: linkHostB, LocalID: "10.0.0.3:20911"},
	} {
		m := linkRaw(t, s.Addr(), keys, linkHostA, linkHostB)
		m.request(1, protocol.Header{Group: "g1", RemoteID: "a", LocalID: "n1"}, true)
		m.request(2, h, false)
		expectClosed(t, m.conn, "wrong member")
		eventually(t, "counted", func() bool { return reasons.get(ReasonWrongMember) == i+1 })
	}
	// A link that dials another host is refused at the handshake.
	conn := dialRaw(t, s.Addr())
	_, msg1, _ := secure.NewLinkInitiator(keys, linkHostA, "10.0.0.9:1")
	conn.Write(appendFrame(nil, msg1))
	expectClosed(t, conn, "wrong host")
	eventually(t, "wrong_peer counted", func() bool { return reasons.get(secure.ReasonWrongPeer) == 1 })
	// A version 1 member still authenticates on the same listener, by its group.
	v1 := newClient(t, map[string]string{"a": s.Addr()}, func(o *ClientOptions) {
		o.Auth = Auth{Keys: keys, Group: "g1", SelfID: "n1"}
	})
	if resp, err := muxHeartBeat(t, v1, "g1", "a", 3); err != nil || resp.Code != protocol.CodeSuccess {
		t.Fatalf("v1: %+v %v", resp, err)
	}
}

// rawLink is a host link spoken by hand.
type rawLink struct {
	t    *testing.T
	conn net.Conn
	sess *secure.Session
}

func linkRaw(t *testing.T, addr string, keys secure.KeySet, self, target string) *rawLink {
	t.Helper()
	conn := dialRaw(t, addr)
	in, msg1, err := secure.NewLinkInitiator(keys, self, target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(appendFrame(nil, msg1)); err != nil {
		t.Fatal(err)
	}
	msg2, err := readFrame(conn)
	if err != nil {
		t.Fatalf("no msg2: %v", err)
	}
	s, err := in.Finish(msg2)
	if err != nil {
		t.Fatal(err)
	}
	return &rawLink{t: t, conn: conn, sess: s}
}

// request sends a sealed heartbeat with header h; answered: wait for a sealed answer.
func (l *rawLink) request(id uint64, h protocol.Header, answered bool) {
	l.t.Helper()
	fb, err := encodeFrame(id, protocol.RequestHeartBeat, false, &protocol.HeartBeatRequest{Header: h}, DefaultMaxFrameSize)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := sealFrame(l.sess, fb); err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.conn.Write(fb.b); err != nil {
		l.t.Fatal(err)
	}
	if !answered {
		return
	}
	body, err := readFrame(l.conn)
	if err != nil {
		l.t.Fatalf("no answer: %v", err)
	}
	if _, err := l.sess.Open(nil, body); err != nil {
		l.t.Fatalf("answer does not open: %v", err)
	}
}

// TestLinkBadFrameClosesThatLinkOnly: a host link that sends a sealed frame whose body is no
// rpc envelope is closed and counted as a bad frame; another host's link on the same server
// keeps being served.
func TestLinkBadFrameClosesThatLinkOnly(t *testing.T) {
	keys := newKeys(t)
	mux, _ := linkMux(t)
	var bad reasonCounter
	s := startServer(t, mux, func(o *ServerOptions) { o.Auth = Auth{Keys: keys}; o.OnBadFrame = bad.add })
	good := linkRaw(t, s.Addr(), keys, linkHostA, linkHostB)
	good.request(1, protocol.Header{Group: "g1", RemoteID: "a", LocalID: "n1"}, true)
	evil := linkRaw(t, s.Addr(), keys, "10.0.0.3:20911", linkHostB)
	body, err := evil.sess.Seal(nil, []byte{0xc1}) // 0xc1: the one byte msgpack never uses
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evil.conn.Write(appendFrame(nil, body)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, evil.conn, "bad frame on a link")
	eventually(t, "bad frame counted", func() bool { return bad.get(ReasonMalformed) == 1 })
	good.request(2, protocol.Header{Group: "g2", RemoteID: "a", LocalID: "n1"}, true)
}
