package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Hostile tests of peer authentication on real members: a calm 3-member group (every member
// holds testKeys) is attacked from outside or by a confused member, and must keep its leader
// and term. A forged message that got through would change a term at once (a heartbeat or
// vote at term+1, a transfer), so the group is watched for attackSettle afterwards.

const attackSettle = time.Second // a forgery that got through changes a term at once (above)

func keyedGroup(t *testing.T) (*group, string, int64) {
	t.Helper()
	g := startGroupWith(t, 3, nil, calmTimings())
	leader, term := g.awaitAllFollow(electionLimit)
	return g, leader, term
}

// assertUnchanged fails unless every running member (but skip, if >= 0) follows leader at
// term throughout attackSettle.
func (g *group) assertUnchanged(leader string, term int64, skip int) {
	g.t.Helper()
	deadline := time.Now().Add(attackSettle)
	for {
		for i, s := range g.servers {
			if g.stopped[i] || i == skip {
				continue
			}
			if st := s.Status(); st.LeaderID != leader || st.Term != term {
				g.t.Fatalf("n%d now has leader %q at term %d; want %s at %d unchanged", i, st.LeaderID, st.Term, leader, term)
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

func (g *group) authFailures(i int, reason string) float64 {
	return counterValue(g.t, g.servers[i].solo.gatherer, "dledger_auth_failures_total", "reason", reason)
}

// others returns the two members other than leader, in order.
func (g *group) others(leader string) (int, int) {
	var o []int
	for i := range g.servers {
		if fmt.Sprintf("n%d", i) != leader {
			o = append(o, i)
		}
	}
	return o[0], o[1]
}

// outsider is an rpc client dialling member i with auth, as an attacker would.
func (g *group) outsider(i int, auth rpc.Auth) *rpc.Client {
	g.t.Helper()
	cl, err := rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{fmt.Sprintf("n%d", i): g.servers[i].RPCAddr()},
		Auth: auth, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { cl.Close() })
	return cl
}

// until repeats send until member i has counted one more authentication failure of reason.
func (g *group) until(i int, reason string, send func()) {
	g.t.Helper()
	before := g.authFailures(i, reason)
	deadline := time.Now().Add(electionLimit)
	for g.authFailures(i, reason) == before {
		if time.Now().After(deadline) {
			g.t.Fatalf("n%d never counted an auth failure %q", i, reason)
		}
		send()
		time.Sleep(20 * time.Millisecond) // the client connects in the background
	}
}

func ignore[T any](*T, error) {}

// Forged requests from a host without the key: a heartbeat at term+1 from a "leader", a vote
// with the largest ledger, and a leadership transfer are refused before they reach the
// elector (counted as plaintext), and the group keeps its leader and term. Without
// authentication each of them changes the term.
func TestForgedRequestsFromOutsideAreRefused(t *testing.T) {
	g, leader, term := keyedGroup(t)
	f1, f2 := g.others(leader)
	id := func(i int) string { return fmt.Sprintf("n%d", i) }
	noKey := rpc.Auth{Insecure: true} // no group or id either: its first frame is the forgery
	cases := []struct {
		name   string
		target int
		send   func(cl *rpc.Client)
	}{
		{"heartbeat at term+1", f1, func(cl *rpc.Client) {
			cl.SendHeartBeat(id(f1), &protocol.HeartBeatRequest{Header: protocol.Header{Group: "g", RemoteID: id(f1),
				LocalID: id(f2), LeaderID: id(f2), Term: term + 1}}, ignore)
		}},
		{"vote with the largest ledger", f1, func(cl *rpc.Client) {
			cl.SendVote(id(f1), &protocol.VoteRequest{Header: protocol.Header{Group: "g", RemoteID: id(f1),
				LocalID: id(f2), LeaderID: id(f2), Term: term + 1},
				LedgerEndTerm: protocol.MaxLedgerValue, LedgerEndIndex: protocol.MaxLedgerValue}, ignore)
		}},
		{"leadership transfer", g.index(leader), func(cl *rpc.Client) {
			cl.SendLeadershipTransfer(leader, &protocol.LeadershipTransferRequest{Header: protocol.Header{Group: "g",
				RemoteID: leader, LocalID: id(f1), Term: term}, TransferID: leader, TransfereeID: id(f1)}, ignore)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := g.outsider(c.target, noKey)
			g.until(c.target, secure.ReasonPlaintext, func() { c.send(cl) })
			g.assertUnchanged(leader, term, -1)
		})
	}
	// The same forged vote from a host with a key of its own never gets a connection.
	cl := g.outsider(f1, rpc.Auth{Keys: otherKeys(t), Group: "g", SelfID: id(f2)})
	g.until(f1, secure.ReasonBadKey, func() { cases[1].send(cl) })
	g.assertUnchanged(leader, term, -1)
}

func otherKeys(t *testing.T) secure.KeySet {
	t.Helper()
	ks, err := freshKeySet()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// A member that authenticated as one id and sends a request as another (a heartbeat at
// term+1 claiming another member leads) is closed before the elector sees it, counted as
// wrong_member.
func TestRequestUnderAnotherMembersIDIsRefused(t *testing.T) {
	g, leader, term := keyedGroup(t)
	f1, f2 := g.others(leader)
	cl := g.outsider(f1, rpc.Auth{Keys: testKeys, Group: "g", SelfID: fmt.Sprintf("n%d", f2)})
	g.until(f1, rpc.ReasonWrongMember, func() {
		cl.SendHeartBeat(fmt.Sprintf("n%d", f1), &protocol.HeartBeatRequest{Header: protocol.Header{Group: "g",
			RemoteID: fmt.Sprintf("n%d", f1), LocalID: leader, LeaderID: leader, Term: term + 1}}, ignore)
	})
	g.assertUnchanged(leader, term, -1)
}

// relay forwards one connection to target and records what the client sent, so a test can
// replay it; inject writes more bytes to the target on the live connection.
type relay struct {
	ln     net.Listener
	mu     sync.Mutex
	sent   bytes.Buffer
	up     net.Conn
	closed chan struct{} // closed when the target closed the connection
}

func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, closed: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		ln.Close() // one connection only: the client's redials fail
		up, err := net.Dial("tcp", target)
		if err != nil {
			down.Close()
			return
		}
		r.mu.Lock()
		r.up = up
		r.mu.Unlock()
		go func() {
			_, _ = io.Copy(down, up)
			down.Close()
			close(r.closed)
		}()
		buf := make([]byte, 4096)
		for {
			n, err := down.Read(buf)
			if n > 0 {
				r.mu.Lock()
				r.sent.Write(buf[:n])
				_, _ = up.Write(buf[:n])
				r.mu.Unlock()
			}
			if err != nil {
				up.Close()
				return
			}
		}
	}()
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.up != nil {
			r.up.Close()
		}
	})
	return r
}

func (r *relay) captured() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.sent.Bytes())
}

func (r *relay) inject(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.up.Write(b)
}

// frames splits a captured byte stream into whole frames (length header included).
func frames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := 4 + int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
		if len(b) < n {
			break
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// Traffic of a member holding the key, captured on the wire: replayed on a new connection
// (the handshake and the frames after it) and on the same connection (a heartbeat again),
// it is refused (decrypt_failed) and the group keeps its leader and term.
func TestReplayedFramesAreRefused(t *testing.T) {
	g, leader, term := keyedGroup(t)
	f1, _ := g.others(leader)
	r := newRelay(t, g.servers[f1].RPCAddr())
	target := fmt.Sprintf("n%d", f1)
	cl, err := rpc.NewClient(rpc.ClientOptions{Peers: map[string]string{target: r.ln.Addr().String()},
		Auth: rpc.Auth{Keys: testKeys, Group: "g", SelfID: leader}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(electionLimit)
	for {
		got := make(chan error, 1)
		cl.SendHeartBeat(target, &protocol.HeartBeatRequest{Header: protocol.Header{Group: "g", RemoteID: target,
			LocalID: leader, LeaderID: leader, Term: term}}, func(_ *protocol.HeartBeatResponse, err error) { got <- err })
		if <-got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member's heartbeat through the relay never got an answer")
		}
		time.Sleep(20 * time.Millisecond) // connecting
	}
	fs := frames(r.captured()) // msg1, the hello, the heartbeat
	if len(fs) != 3 {
		t.Fatalf("captured %d frames, want msg1, hello and heartbeat", len(fs))
	}

	t.Run("new connection", func(t *testing.T) {
		before := g.authFailures(f1, secure.ReasonDecrypt)
		conn, err := net.Dial("tcp", g.servers[f1].RPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(electionLimit))
		if _, err := conn.Write(bytes.Join(fs, nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, conn); err != nil { // msg2, then the close
			t.Fatalf("the replaying connection was not closed: %v", err)
		}
		if g.authFailures(f1, secure.ReasonDecrypt) != before+1 {
			t.Fatal("the replay was not counted as decrypt_failed")
		}
		g.assertUnchanged(leader, term, -1)
	})
	t.Run("same connection", func(t *testing.T) {
		before := g.authFailures(f1, secure.ReasonDecrypt)
		r.inject(fs[2])
		select {
		case <-r.closed:
		case <-time.After(electionLimit):
			t.Fatal("the connection carrying a replayed heartbeat was not closed")
		}
		if g.authFailures(f1, secure.ReasonDecrypt) != before+1 {
			t.Fatal("the replay was not counted as decrypt_failed")
		}
		g.assertUnchanged(leader, term, -1)
	})
}

// A member started with another key is refused by the others (bad_key) and learns that its
// handshakes are refused (refused); the group keeps its leader and term meanwhile.
func TestMemberWithWrongKeyIsRefused(t *testing.T) {
	g, leader, term := keyedGroup(t)
	f1, f2 := g.others(leader)
	l := g.index(leader)
	g.stop(f1)
	g.keys = map[int]secure.KeySet{f1: otherKeys(t)}
	g.start(f1, [2]int64{})
	deadline := time.Now().Add(electionLimit)
	for g.authFailures(l, secure.ReasonBadKey) == 0 || g.authFailures(f2, secure.ReasonBadKey) == 0 ||
		g.authFailures(f1, rpc.ReasonRefused) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("bad_key at the leader %v, at n%d %v; refused at n%d %v", g.authFailures(l, secure.ReasonBadKey),
				f2, g.authFailures(f2, secure.ReasonBadKey), f1, g.authFailures(f1, rpc.ReasonRefused))
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	g.assertUnchanged(leader, term, f1)
	if st := g.servers[f1].Status(); st.LeaderID == leader {
		t.Fatalf("the member with the wrong key follows %s: it heard the group", leader)
	}
}

// Connections from one host that never start a handshake are closed at the handshake
// deadline (beyond the per-source bound at once), counted, and the group is unaffected.
func TestHandshakeFloodLeavesTheGroupAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 5 s handshake deadline")
	}
	g, leader, term := keyedGroup(t)
	f1, _ := g.others(leader)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	const flood = 40
	var wg sync.WaitGroup
	for i := 0; i < flood; i++ {
		c, err := d.Dial("tcp", g.servers[f1].RPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(electionLimit))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Error("a flood connection got bytes")
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Error("a flood connection was never closed")
			}
		}()
	}
	wg.Wait()
	if n := g.authFailures(f1, rpc.ReasonHandshakeTimeout); n != 32 {
		t.Fatalf("handshake_timeout %v, want the 32 connections the per-source bound let in", n)
	}
	g.assertUnchanged(leader, term, -1)
}

// A key rotation rolled out member by member (followers first, the leader last, so each step
// has one hand-over) never breaks a connection: at every point every member follows one
// leader, no member counts an authentication failure, and restarting a follower leaves the
// leader and term as they were. After the last step the old key is refused.
func TestKeyRotationWithoutDowntime(t *testing.T) {
	g, leader, term := keyedGroup(t)
	a, b := testKeys.Primary(), otherKeys(t).Primary()
	set := func(keys ...[secure.KeySize]byte) secure.KeySet {
		ks, err := secure.NewKeySet(keys[0], keys[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	g.keys = map[int]secure.KeySet{}
	noFailures := func(when string) {
		t.Helper()
		for i := range g.servers {
			for _, r := range rpc.AuthFailureReasons() {
				if n := g.authFailures(i, r); n != 0 {
					t.Fatalf("%s: n%d counted %v auth failures %q", when, i, n, r)
				}
			}
		}
	}
	for step, keys := range []secure.KeySet{set(a, b), set(b, a), set(b)} {
		f1, f2 := g.others(leader)
		for _, i := range []int{f1, f2, g.index(leader)} {
			wasLeader := fmt.Sprintf("n%d", i) == leader
			g.stop(i)
			g.keys[i] = keys
			g.start(i, [2]int64{})
			l, tm := g.awaitAllFollow(electionLimit)
			if !wasLeader && (l != leader || tm != term) {
				t.Fatalf("step %d: restarting follower n%d moved the group from %s@%d to %s@%d", step+1, i, leader, term, l, tm)
			}
			leader, term = l, tm
			noFailures(fmt.Sprintf("step %d, n%d restarted", step+1, i))
		}
	}
	// Every member holds only the new key now: a member still on the old one is refused.
	f1, _ := g.others(leader)
	cl := g.outsider(f1, rpc.Auth{Keys: testKeys, Group: "g", SelfID: leader})
	g.until(f1, secure.ReasonBadKey, func() {})
	if cl.Connected(fmt.Sprintf("n%d", f1)) {
		t.Fatal("a member with the retired key connected")
	}
}
