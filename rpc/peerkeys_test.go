package rpc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// memberKeys is a group's key pairs and one trust list naming them all.
type memberKeys struct {
	t     testing.TB
	keys  map[string]secure.StaticKey
	trust *secure.Trust
}

func newMemberKeys(t testing.TB, ids ...string) *memberKeys {
	t.Helper()
	m := &memberKeys{t: t, keys: map[string]secure.StaticKey{}}
	for _, id := range ids {
		k, err := secure.GenerateStaticKey()
		if err != nil {
			t.Fatal(err)
		}
		m.keys[id] = k
	}
	m.trust = m.trustOf(nil)
	return m
}

// trustOf is the trust list of m's keys, with edit's changes (id -> keys; nil drops the id).
func (m *memberKeys) trustOf(edit map[string][]secure.PublicKey) *secure.Trust {
	m.t.Helper()
	entries := map[string][]secure.PublicKey{}
	for id, k := range m.keys {
		entries[id] = []secure.PublicKey{k.Public()}
	}
	for id, keys := range edit {
		if keys == nil {
			delete(entries, id)
		} else {
			entries[id] = keys
		}
	}
	tr, err := secure.NewTrust(entries)
	if err != nil {
		m.t.Fatal(err)
	}
	return tr
}

func (m *memberKeys) identity(self string, key secure.StaticKey, trust *secure.Trust) *secure.Identity {
	m.t.Helper()
	id, err := secure.NewIdentity(key, trust, self)
	if err != nil {
		m.t.Fatal(err)
	}
	return id
}

func (m *memberKeys) peerKeys(self string) *PeerKeys {
	m.t.Helper()
	pk, err := NewPeerKeys(m.identity(self, m.keys[self], m.trust))
	if err != nil {
		m.t.Fatal(err)
	}
	return pk
}

// memberServer starts member testSelf with member keys, accepting n1 and n2.
func memberServer(t *testing.T, h Handler, pk *PeerKeys, reasons *reasonCounter) *Server {
	return startServer(t, h, func(o *ServerOptions) {
		o.Auth = Auth{PeerKeys: pk, Group: testGroup, SelfID: testSelf, Members: []string{"n1", "n2", testSelf}}
		o.OnAuthFailure = reasons.add
	})
}

// memberClient is member id's client of testSelf at addr, counting its connections.
func memberClient(t *testing.T, addr, id string, pk *PeerKeys, reasons *reasonCounter, connects *atomic.Int32) *Client {
	t.Helper()
	cl, err := NewClient(ClientOptions{Peers: map[string]string{testSelf: addr},
		Auth:         Auth{PeerKeys: pk, Group: testGroup, SelfID: id},
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond,
		Hooks: Hooks{OnAuthFailure: reasons.add},
		OnPeerConnected: func(string) {
			if connects != nil {
				connects.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func heartBeatAs(t *testing.T, cl *Client, id string, term int64) (*protocol.HeartBeatResponse, error) {
	t.Helper()
	return callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
		req := hbRequest(term)
		req.LocalID, req.LeaderID = id, id
		cl.SendHeartBeat(testSelf, req, done)
	})
}

func TestMemberKeysRoundTrip(t *testing.T) {
	mk := newMemberKeys(t, testSelf, "n1", "n2")
	var reasons, clientReasons reasonCounter
	s := memberServer(t, &fakeHandler{}, mk.peerKeys(testSelf), &reasons)
	cl := memberClient(t, s.Addr(), "n1", mk.peerKeys("n1"), &clientReasons, nil)
	eventually(t, "n1 connected", func() bool { return cl.Connected(testSelf) })
	for term := int64(1); term <= 3; term++ {
		if resp, err := heartBeatAs(t, cl, "n1", term); err != nil || resp.Code != protocol.CodeSuccess {
			t.Fatalf("heartbeat: %+v %v", resp, err)
		}
	}
	if s.Stats().AuthFailures != 0 || cl.Stats().AuthFailures != 0 {
		t.Fatalf("auth failures: %d, %d", s.Stats().AuthFailures, cl.Stats().AuthFailures)
	}
}

// TestMemberKeysStolenKey: whoever holds n1's private key gets zero frames accepted as n2, in
// both directions. As a dialler claiming n2 its handshake is refused (wrong_id) and a sealed
// heartbeat sent behind msg3 never reaches the handler; as a listener answering a dial to n2
// (its server claims to be n2 with n1's key) the dialler refuses it (wrong_id), never counts
// as connected, and sends it no request. n1 itself, with the same key, is served meanwhile.
func TestMemberKeysStolenKey(t *testing.T) {
	mk := newMemberKeys(t, testSelf, "n1", "n2")
	// The thief's identity: n1's key pair under the id n2 (its own trust list says so).
	thiefTrust := mk.trustOf(map[string][]secure.PublicKey{"n1": nil, "n2": {mk.keys["n1"].Public()}})
	thief := mk.identity("n2", mk.keys["n1"], thiefTrust)

	// Direction 1: the thief dials testSelf as n2, by hand, and sends a heartbeat at once.
	h := &fakeHandler{}
	var reasons reasonCounter
	s := memberServer(t, h, mk.peerKeys(testSelf), &reasons)
	conn := dialRaw(t, s.Addr())
	in, msg1, err := secure.NewStaticInitiator(thief, testGroup, "n2", testSelf)
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
	msg3, sess, err := in.Finish(msg2)
	if err != nil {
		t.Fatal(err) // the thief trusts testSelf's real key: its side completes
	}
	m := &rawMember{t: t, conn: conn, sess: sess}
	_, _ = conn.Write(append(appendFrame(nil, msg3), m.sealed(1, "n2")...))
	expectClosed(t, conn, "the thief's connection as n2")
	eventually(t, "wrong_id counted", func() bool { return reasons.get(secure.ReasonWrongID) == 1 })

	// Through a real client too, and n1's genuine connection is unaffected.
	var thiefReasons reasonCounter
	thiefPK, _ := NewPeerKeys(thief)
	tc := memberClient(t, s.Addr(), "n2", thiefPK, &thiefReasons, nil)
	genuine := memberClient(t, s.Addr(), "n1", mk.peerKeys("n1"), &reasonCounter{}, nil)
	eventually(t, "n1 connected", func() bool { return genuine.Connected(testSelf) })
	if resp, err := heartBeatAs(t, genuine, "n1", 1); err != nil || resp.Code != protocol.CodeSuccess {
		t.Fatalf("n1's heartbeat: %+v %v", resp, err)
	}
	handledByN1 := h.handled.Load()
	// (Its client may count as connected for a moment each time: a member-key dialler
	// learns of a refusal only when the listener closes after msg3. What counts is that
	// nothing it sends is served, checked below.)
	eventually(t, "the thief client refused twice more", func() bool { return reasons.get(secure.ReasonWrongID) >= 3 })
	_ = tc

	// Direction 2: the thief listens as n2; testSelf's client dials n2 and refuses it.
	th := &fakeHandler{}
	thiefSrv := startServer(t, th, func(o *ServerOptions) {
		o.Auth = Auth{PeerKeys: thiefPK, Group: testGroup, SelfID: "n2", Members: []string{testSelf}}
	})
	var selfReasons reasonCounter
	cl, err := NewClient(ClientOptions{Peers: map[string]string{"n2": thiefSrv.Addr()},
		Auth:         Auth{PeerKeys: mk.peerKeys(testSelf), Group: testGroup, SelfID: testSelf},
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond,
		Hooks: Hooks{OnAuthFailure: selfReasons.add}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	eventually(t, "the dialler refuses the thief twice", func() bool { return selfReasons.get(secure.ReasonWrongID) >= 2 })
	if cl.Connected("n2") {
		t.Fatal("the dialler counts the thief as n2")
	}
	_, err = callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
		cl.SendHeartBeat("n2", &protocol.HeartBeatRequest{Header: protocol.Header{Group: testGroup, RemoteID: "n2", LocalID: testSelf, Term: 1}}, done)
	})
	if err == nil {
		t.Fatal("a heartbeat to the thief was answered")
	}
	if n := th.handled.Load(); n != 0 {
		t.Fatalf("the thief's server handled %d requests from the dialler", n)
	}
	if n := h.handled.Load(); n != handledByN1 {
		t.Fatalf("the thief got %d requests handled as n2", n-handledByN1)
	}
}

// TestMemberKeysReloadRevokes: a reload that drops n1's key closes n1's live connection at
// once (revoked, counted on the server) and refuses its redials, while n2's connection stays
// the same connection; when n1 gets a new key, listed by the next reload, it is served again.
// The client side revokes too: n2 reloading a trust list without the server's key closes its
// own connection to it.
func TestMemberKeysReloadRevokes(t *testing.T) {
	mk := newMemberKeys(t, testSelf, "n1", "n2")
	var reasons reasonCounter
	spk := mk.peerKeys(testSelf)
	s := memberServer(t, &fakeHandler{}, spk, &reasons)
	var n1Connects, n2Connects atomic.Int32
	n1pk, n2pk := mk.peerKeys("n1"), mk.peerKeys("n2")
	var n1Reasons, n2Reasons reasonCounter
	c1 := memberClient(t, s.Addr(), "n1", n1pk, &n1Reasons, &n1Connects)
	c2 := memberClient(t, s.Addr(), "n2", n2pk, &n2Reasons, &n2Connects)
	eventually(t, "both connected", func() bool { return c1.Connected(testSelf) && c2.Connected(testSelf) })
	eventually(t, "both tracked", func() bool { return spk.Live() == 2 })

	newN1, _ := secure.GenerateStaticKey()
	dropped := mk.trustOf(map[string][]secure.PublicKey{"n1": {newN1.Public()}})
	next, err := spk.Identity().Next(mk.keys[testSelf], dropped, testSelf)
	if err != nil {
		t.Fatal(err)
	}
	if closed := spk.Reload(next); closed != 1 {
		t.Fatalf("reload closed %d connections, want n1's", closed)
	}
	eventually(t, "revoked counted", func() bool { return reasons.get(secure.ReasonRevoked) >= 2 }) // the close and a redial
	if resp, err := heartBeatAs(t, c2, "n2", 1); err != nil || resp.Code != protocol.CodeSuccess {
		t.Fatalf("n2's heartbeat after the reload: %+v %v", resp, err)
	}
	if n := n2Connects.Load(); n != 1 {
		t.Fatalf("n2 connected %d times: its connection was disturbed", n)
	}
	// n1 gets its new key: its own reload (the trust list is the same one).
	n1next, err := n1pk.Identity().Next(newN1, mk.trustOf(map[string][]secure.PublicKey{"n1": {newN1.Public()}}), "n1")
	if err != nil {
		t.Fatal(err)
	}
	n1pk.Reload(n1next)
	// A dial begun with the old key may still be in flight (a member-key dialler learns of
	// its refusal only when the listener closes after msg3), so wait for an answer.
	eventually(t, "n1 served with its new key", func() bool {
		resp, err := heartBeatAs(t, c1, "n1", 2)
		return err == nil && resp.Code == protocol.CodeSuccess
	})

	// The dialler's side: n2 stops trusting the server's key.
	other, _ := secure.GenerateStaticKey()
	n2next, err := n2pk.Identity().Next(mk.keys["n2"], mk.trustOf(map[string][]secure.PublicKey{testSelf: {other.Public()}}), "n2")
	if err != nil {
		t.Fatal(err)
	}
	if closed := n2pk.Reload(n2next); closed != 1 {
		t.Fatalf("n2's reload closed %d connections", closed)
	}
	eventually(t, "n2 counts the revocation", func() bool { return n2Reasons.get(secure.ReasonRevoked) >= 1 })
	eventually(t, "n2 disconnected", func() bool { return !c2.Connected(testSelf) })
}

// TestMemberKeysReloadDuringHandshake: a handshake that began before a reload revoking the
// dialler's key and finishes after it (msg3 sent after the reload) is refused as revoked:
// the listener read msg1 with the old trust list, but the session is checked again when it
// is registered. A heartbeat sent behind msg3 is never served.
func TestMemberKeysReloadDuringHandshake(t *testing.T) {
	mk := newMemberKeys(t, testSelf, "n1", "n2")
	h := &fakeHandler{}
	var reasons reasonCounter
	spk := mk.peerKeys(testSelf)
	s := memberServer(t, h, spk, &reasons)
	conn := dialRaw(t, s.Addr())
	in, msg1, err := secure.NewStaticInitiator(mk.identity("n1", mk.keys["n1"], mk.trust), testGroup, "n1", testSelf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(appendFrame(nil, msg1)); err != nil {
		t.Fatal(err)
	}
	msg2, err := readFrame(conn)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := secure.GenerateStaticKey()
	next, err := spk.Identity().Next(mk.keys[testSelf], mk.trustOf(map[string][]secure.PublicKey{"n1": {other.Public()}}), testSelf)
	if err != nil {
		t.Fatal(err)
	}
	spk.Reload(next) // between msg2 and msg3
	msg3, sess, err := in.Finish(msg2)
	if err != nil {
		t.Fatal(err)
	}
	m := &rawMember{t: t, conn: conn, sess: sess}
	_, _ = conn.Write(append(appendFrame(nil, msg3), m.sealed(1, "n1")...))
	expectClosed(t, conn, "a handshake finished after its key was revoked")
	eventually(t, "revoked counted", func() bool { return reasons.get(secure.ReasonRevoked) == 1 })
	if n := h.handled.Load(); n != 0 {
		t.Fatalf("%d requests served on a revoked key", n)
	}
	if n := spk.Live(); n != 0 {
		t.Fatalf("%d sessions tracked", n)
	}
}
