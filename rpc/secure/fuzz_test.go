package secure

import (
	"testing"

	"github.com/flynn/noise"
)

// Fixed keys so that a seeded valid message stays valid across runs of the corpus.
var fuzzKey = [KeySize]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}

func fuzzKeys(t testing.TB) KeySet {
	other := fuzzKey
	other[0] = 99
	return keySet(t, other, fuzzKey) // two keys: both trial reads run
}

// FuzzRespond: arbitrary bytes as msg1 never panic, and every refusal has a known reason.
func FuzzRespond(f *testing.F) {
	ks := fuzzKeys(f)
	_, good, err := NewInitiator(ks, testGroup, "a", "b")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Add([]byte{0x94, 0x01})
	f.Add(append([]byte{Version}, make([]byte, msg1MaxLen)...))
	f.Fuzz(func(t *testing.T, msg1 []byte) {
		msg2, s, _, err := Respond(ks, testGroup, "b", msg1, acceptAll)
		if err != nil {
			if s != nil || msg2 != nil {
				t.Fatal("refusal returned a session")
			}
			if r := Reason(err); r == ReasonOther || r == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if len(msg2) > msg2MaxLen || s == nil {
			t.Fatalf("msg2 of %d bytes, session %v", len(msg2), s)
		}
	})
}

// FuzzFinish: arbitrary bytes as msg2 never panic.
func FuzzFinish(f *testing.F) {
	ks := fuzzKeys(f)
	f.Add([]byte{})
	f.Add(make([]byte, msg2MinLen))
	f.Add(make([]byte, msg2MaxLen))
	f.Fuzz(func(t *testing.T, msg2 []byte) {
		in, _, err := NewInitiator(ks, testGroup, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		if s, err := in.Finish(msg2); err == nil || s != nil {
			t.Fatal("an arbitrary msg2 finished the handshake") // the ephemeral key is fresh
		}
	})
}

// FuzzOpen: arbitrary bytes as a frame never panic, and only the seeded genuine frame opens.
func FuzzOpen(f *testing.F) {
	k1, k2 := fuzzKey, fuzzKey
	k2[31] = 0
	newPair := func() (send, recv *Session) {
		send = newSession("b", "", noise.UnsafeNewCipherState(suite, k1, 0), noise.UnsafeNewCipherState(suite, k2, 0))
		recv = newSession("a", "", noise.UnsafeNewCipherState(suite, k2, 0), noise.UnsafeNewCipherState(suite, k1, 0))
		return send, recv
	}
	send, _ := newPair()
	genuine, _ := send.Seal(nil, []byte("heartbeat"))
	f.Add(genuine)
	f.Add([]byte{})
	f.Add(make([]byte, Overhead))
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, frame []byte) {
		_, recv := newPair()
		pt, err := recv.Open(nil, frame)
		if err == nil && string(pt) != "heartbeat" {
			t.Fatalf("forged frame opened: %q", pt)
		}
		if err != nil && Reason(err) != ReasonDecrypt && Reason(err) != ReasonMalformed {
			t.Fatalf("unexpected error %v", err)
		}
		if _, err2 := recv.Open(nil, frame); err2 == nil {
			t.Fatal("a frame opened twice")
		}
	})
}

// FuzzParseKeys: arbitrary key file contents never panic, and a set that loads is sane.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("# c\nAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=  # key id x\n"))
	f.Add([]byte("AAAA\n"))
	f.Add([]byte("\r\n\x00#"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := parseKeys("fuzz", data)
		if err == nil && (ks.Len() < 1 || ks.Len() > MaxKeys || ks.Primary() == [KeySize]byte{}) {
			t.Fatalf("loaded a bad set of %d keys", ks.Len())
		}
	})
}

// fuzzIdentity is a member-key identity of fixed keys, so seeded messages stay meaningful.
func fuzzIdentity(t testing.TB, self string, priv byte, peers map[string]byte) *Identity {
	var p [KeySize]byte
	p[5] = priv
	k, err := NewStaticKey(p)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string][]PublicKey{self: {k.Public()}}
	for id, b := range peers {
		var q [KeySize]byte
		q[5] = b
		pk, _ := NewStaticKey(q)
		entries[id] = []PublicKey{pk.Public()}
	}
	tr, err := NewTrust(entries)
	if err != nil {
		t.Fatal(err)
	}
	id, err := NewIdentity(k, tr, self)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// FuzzRespondStatic: arbitrary bytes as a member-key msg1 never panic; a refusal has a known
// reason and no responder; an accepted one names a group, a peer and a target within bounds.
func FuzzRespondStatic(f *testing.F) {
	b := fuzzIdentity(f, "b", 2, map[string]byte{"a": 1})
	a := fuzzIdentity(f, "a", 1, map[string]byte{"b": 2})
	_, good, err := NewStaticInitiator(a, testGroup, "a", "b")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	_, link, _ := NewStaticInitiator(a, "", "a", "b")
	f.Add(link)
	f.Add([]byte{VersionStatic})
	f.Add(append([]byte{VersionStatic}, make([]byte, staticMsg1MaxLen)...))
	f.Fuzz(func(t *testing.T, msg1 []byte) {
		r, msg2, group, peer, target, err := RespondStatic(b, msg1, func(string, string, string) error { return nil })
		if err != nil {
			if r != nil || msg2 != nil {
				t.Fatal("refusal returned a responder")
			}
			if rs := Reason(err); rs == ReasonOther || rs == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if len(msg2) > MaxHandshakeLen || len(group) > MaxGroupLen || peer == "" || len(peer) > MaxIDLen || target == "" || len(target) > MaxIDLen {
			t.Fatalf("accepted msg1 out of bounds: msg2 %d bytes, %q %q %q", len(msg2), group, peer, target)
		}
	})
}

// FuzzStaticFinish: arbitrary bytes as msg2 (to the initiator) or msg3 (to the responder)
// never panic and never finish a handshake: every message depends on a fresh ephemeral key.
func FuzzStaticFinish(f *testing.F) {
	a := fuzzIdentity(f, "a", 1, map[string]byte{"b": 2})
	b := fuzzIdentity(f, "b", 2, map[string]byte{"a": 1})
	f.Add([]byte{})
	f.Add(make([]byte, staticMsg2MinLen))
	f.Add(make([]byte, staticMsg3Len))
	f.Fuzz(func(t *testing.T, msg []byte) {
		in, msg1, err := NewStaticInitiator(a, testGroup, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		if _, s, err := in.Finish(msg); err == nil || s != nil {
			t.Fatal("an arbitrary msg2 finished the handshake")
		}
		r, _, _, _, _, err := RespondStatic(b, msg1, func(string, string, string) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if s, err := r.Finish(msg); err == nil || s != nil {
			t.Fatal("an arbitrary msg3 finished the handshake")
		} else if rs := Reason(err); rs == ReasonOther {
			t.Fatalf("error without a reason: %v", err)
		}
	})
}
