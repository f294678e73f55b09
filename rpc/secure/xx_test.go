package secure

import (
	"bytes"
	"errors"
	"testing"
)

func staticKey(t testing.TB) StaticKey {
	t.Helper()
	k, err := GenerateStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// trio is three members' keys and identities over one trust list.
type trio struct {
	keys  map[string]StaticKey
	trust *Trust
	ids   map[string]*Identity
}

func newTrio(t testing.TB) *trio {
	t.Helper()
	tr := &trio{keys: map[string]StaticKey{}, ids: map[string]*Identity{}}
	entries := map[string][]PublicKey{}
	for _, id := range []string{"a", "b", "c"} {
		tr.keys[id] = staticKey(t)
		entries[id] = []PublicKey{tr.keys[id].Public()}
	}
	var err error
	if tr.trust, err = NewTrust(entries); err != nil {
		t.Fatal(err)
	}
	for id, k := range tr.keys {
		if tr.ids[id], err = NewIdentity(k, tr.trust, id); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// acceptGroup is a responder's check for member target of testGroup, whose peers are ids.
func acceptGroup(self string, ids ...string) func(group, peer, target string) error {
	return func(group, peer, target string) error {
		if group != testGroup || target != self {
			return ErrWrongPeer
		}
		if !members(ids...)(peer) {
			return ErrUnknownMember
		}
		return nil
	}
}

// staticPair runs a whole member-key handshake, self dialling target; the error is the
// first one either side returned.
func staticPair(ini *Identity, self, target string, resp *Identity, check func(string, string, string) error) (a, b *Session, err error) {
	in, msg1, err := NewStaticInitiator(ini, testGroup, self, target)
	if err != nil {
		return nil, nil, err
	}
	r, msg2, _, _, _, err := RespondStatic(resp, msg1, check)
	if err != nil {
		return nil, nil, err
	}
	msg3, a, err := in.Finish(msg2)
	if err != nil {
		return nil, nil, err
	}
	b, err = r.Finish(msg3)
	if err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

func TestStaticHandshake(t *testing.T) {
	tr := newTrio(t)
	a, b, err := staticPair(tr.ids["a"], "a", "b", tr.ids["b"], acceptGroup("b", "a", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if a.PeerID() != "b" || b.PeerID() != "a" || a.PeerKey() != tr.keys["b"].Public() || b.PeerKey() != tr.keys["a"].Public() {
		t.Fatalf("peers %q %q, keys %s %s", a.PeerID(), b.PeerID(), a.PeerKey().ID(), b.PeerKey().ID())
	}
	for i, s := range [][2]*Session{{a, b}, {b, a}, {a, b}} {
		ct, err := s[0].Seal(nil, []byte("heartbeat"))
		if err != nil {
			t.Fatal(err)
		}
		pt, err := s[1].Open(nil, ct)
		if err != nil || string(pt) != "heartbeat" {
			t.Fatalf("frame %d: %q %v", i, pt, err)
		}
	}
}

// Holding member a's private key gets nothing accepted as member b, in either direction: as
// a dialler claiming b (msg3 carries a's key, the trust list has it under a), and as a
// listener answering a dial to b (msg2 carries a's key).
func TestStaticKeyCannotImpersonate(t *testing.T) {
	tr := newTrio(t)
	// The thief holds a's key pair, and trusts everyone (its own list is irrelevant to the
	// victims; it needs one that lists itself under the id it claims to build an identity).
	thiefTrust, err := NewTrust(map[string][]PublicKey{"b": {tr.keys["a"].Public()}, "c": {tr.keys["c"].Public()}})
	if err != nil {
		t.Fatal(err)
	}
	thief, err := NewIdentity(tr.keys["a"], thiefTrust, "b")
	if err != nil {
		t.Fatal(err)
	}
	// Dialling c as b.
	_, _, err = staticPair(thief, "b", "c", tr.ids["c"], acceptGroup("c", "a", "b"))
	if !errors.Is(err, ErrWrongID) {
		t.Fatalf("dialling as b with a's key: %v, want ErrWrongID", err)
	}
	// Answering c's dial to b.
	_, _, err = staticPair(tr.ids["c"], "c", "b", thief, acceptGroup("b", "a", "c"))
	if !errors.Is(err, ErrWrongID) {
		t.Fatalf("answering as b with a's key: %v, want ErrWrongID", err)
	}
	// A key nobody listed: unknown_key; a member not listed: unknown_member.
	strangerTrust, _ := NewTrust(map[string][]PublicKey{"b": {staticKey(t).Public()}})
	stranger, _ := NewIdentity(staticKey(t), strangerTrust, "b")
	if stranger != nil {
		t.Fatal("an identity whose key is not its own entry's")
	}
	k := staticKey(t)
	strangerTrust, _ = NewTrust(map[string][]PublicKey{"b": {k.Public()}, "c": {tr.keys["c"].Public()}})
	stranger, err = NewIdentity(k, strangerTrust, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err = staticPair(stranger, "b", "c", tr.ids["c"], acceptGroup("c", "a", "b")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("stranger: %v, want ErrUnknownKey", err)
	}
	if Reason(err) != ReasonUnknownKey {
		t.Fatalf("reason %q", Reason(err))
	}
}

// A changed id in msg1's clear payload fails the handshake: the payload is in the hash.
func TestStaticMsg1PayloadIsBound(t *testing.T) {
	tr := newTrio(t)
	in, msg1, err := NewStaticInitiator(tr.ids["a"], testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(msg1, []byte{1, 'a'})
	tampered := append([]byte(nil), msg1...)
	tampered[i+1] = 'c' // a claims to be c; c's key is c's, but the responder sees c's claim
	r, msg2, _, peer, _, err := RespondStatic(tr.ids["b"], tampered, acceptGroup("b", "a", "c"))
	if err != nil || peer != "c" {
		t.Fatalf("respond: %v, peer %q", err, peer)
	}
	if _, _, err := in.Finish(msg2); !errors.Is(err, ErrBadKey) {
		t.Fatalf("initiator finished on a tampered msg1: %v", err)
	}
	_ = r
}

func TestStaticResponderRefusesBeforeDH(t *testing.T) {
	tr := newTrio(t)
	for _, c := range []struct {
		self, target string
		want         error
	}{
		{"a", "c", ErrWrongPeer},     // dialled another member
		{"x", "b", ErrUnknownMember}, // not a peer of b
	} {
		_, msg1, err := NewStaticInitiator(tr.ids["a"], testGroup, c.self, c.target)
		if err != nil {
			t.Fatal(err)
		}
		r, msg2, _, _, _, err := RespondStatic(tr.ids["b"], msg1, acceptGroup("b", "a", "c"))
		if !errors.Is(err, c.want) || r != nil || msg2 != nil {
			t.Errorf("%s -> %s: %v, want %v", c.self, c.target, err, c.want)
		}
	}
	// Other versions are refused as such, and the reverse.
	_, v1, _ := NewInitiator(keySet(t, newKey(t)), testGroup, "a", "b")
	if _, _, _, _, _, err := RespondStatic(tr.ids["b"], v1, acceptGroup("b", "a")); !errors.Is(err, ErrVersion) {
		t.Errorf("version 1 msg1: %v", err)
	}
	_, v3, _ := NewStaticInitiator(tr.ids["a"], testGroup, "a", "b")
	if _, _, _, err := Respond(keySet(t, newKey(t)), testGroup, "b", v3, acceptAll); !errors.Is(err, ErrVersion) {
		t.Errorf("version 3 msg1 to version 1: %v", err)
	}
}

// After a reload that drops a's key, a's handshake is refused as revoked, and Check says so
// for a's live sessions; a's new key is accepted.
func TestStaticRevocation(t *testing.T) {
	tr := newTrio(t)
	newA := staticKey(t)
	trust2, err := NewTrust(map[string][]PublicKey{"a": {newA.Public()}, "b": {tr.keys["b"].Public()}, "c": {tr.keys["c"].Public()}})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := tr.ids["b"].Next(tr.keys["b"], trust2, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := staticPair(tr.ids["a"], "a", "b", b2, acceptGroup("b", "a", "c")); !errors.Is(err, ErrRevoked) {
		t.Fatalf("old key after the reload: %v, want ErrRevoked", err)
	}
	if err := b2.Check("a", tr.keys["a"].Public()); Reason(err) != ReasonRevoked {
		t.Fatalf("Check: %v", err)
	}
	a2, err := NewIdentity(newA, trust2, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := staticPair(a2, "a", "b", b2, acceptGroup("b", "a", "c")); err != nil {
		t.Fatalf("new key: %v", err)
	}
	// A rotation in progress: a listed with both keys, both accepted.
	both, _ := NewTrust(map[string][]PublicKey{"a": {tr.keys["a"].Public(), newA.Public()}, "b": {tr.keys["b"].Public()}})
	b3, err := b2.Next(tr.keys["b"], both, "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, ini := range []*Identity{tr.ids["a"], a2} {
		if _, _, err := staticPair(ini, "a", "b", b3, acceptGroup("b", "a")); err != nil {
			t.Fatalf("during the rotation: %v", err)
		}
	}
}

func TestNewIdentityRefusesOwnKeyMissing(t *testing.T) {
	tr := newTrio(t)
	if _, err := NewIdentity(staticKey(t), tr.trust, "a"); err == nil {
		t.Error("a key that is not a's entry")
	}
	if _, err := NewIdentity(tr.keys["a"], tr.trust, "z"); err == nil {
		t.Error("an id not in the trust list")
	}
	if _, err := NewIdentity(tr.keys["a"], tr.trust, "b"); err == nil {
		t.Error("a's key as b")
	}
}
