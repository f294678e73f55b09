package secure

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

const hostA, hostB = "127.0.0.1:20911", "127.0.0.1:20912"

// linkCheck accepts dialling hosts in known and targets equal to self.
func linkCheck(self string, known ...string) func(peer, target string) error {
	return func(peer, target string) error {
		if target != self {
			return fmt.Errorf("%w: dialled %q", ErrWrongPeer, target)
		}
		for _, k := range known {
			if k == peer {
				return nil
			}
		}
		return fmt.Errorf("%w: %q", ErrUnknownMember, peer)
	}
}

// TestLinkHandshake: a host link handshake binds the two host ids, and its sessions carry
// frames both ways like a version 1 session.
func TestLinkHandshake(t *testing.T) {
	k := newKey(t)
	in, msg1, err := NewLinkInitiator(keySet(t, k), hostA, hostB)
	if err != nil {
		t.Fatal(err)
	}
	if MsgVersion(msg1) != VersionLink || len(msg1) > MaxHandshakeLen {
		t.Fatalf("msg1 version %d, %d bytes", MsgVersion(msg1), len(msg1))
	}
	msg2, b, peer, err := RespondLink(keySet(t, newKey(t), k), msg1, linkCheck(hostB, hostA))
	if err != nil || peer != hostA || b.PeerID() != hostA {
		t.Fatalf("RespondLink: peer %q, %v", peer, err)
	}
	a, err := in.Finish(msg2)
	if err != nil || a.PeerID() != hostB {
		t.Fatalf("Finish: %v", err)
	}
	sealed, _ := a.Seal(nil, []byte("hello"))
	if got, err := b.Open(nil, sealed); err != nil || !bytes.Equal(got, []byte("hello")) {
		t.Fatalf("open: %q %v", got, err)
	}
	sealed, _ = b.Seal(nil, []byte("back"))
	if got, err := a.Open(nil, sealed); err != nil || string(got) != "back" {
		t.Fatalf("open back: %q %v", got, err)
	}
}

// TestLinkRefusals: the versions do not mix (each refuses the other's msg1 as a version
// mismatch), a wrong key is bad_key, and the responder's check and the initiator's check of
// who answered both hold.
func TestLinkRefusals(t *testing.T) {
	k := newKey(t)
	ks := keySet(t, k)
	_, v1, err := NewInitiator(ks, testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := RespondLink(ks, v1, linkCheck(hostB, hostA)); Reason(err) != ReasonVersion {
		t.Fatalf("v1 msg1 to RespondLink: %v", err)
	}
	_, v2, err := NewLinkInitiator(ks, hostA, hostB)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Respond(ks, testGroup, "b", v2, acceptAll); Reason(err) != ReasonVersion {
		t.Fatalf("v2 msg1 to Respond: %v", err)
	}
	if _, _, _, err := RespondLink(keySet(t, newKey(t)), v2, linkCheck(hostB, hostA)); !errors.Is(err, ErrBadKey) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, _, _, err := RespondLink(ks, v2, linkCheck("127.0.0.1:1", hostA)); Reason(err) != ReasonWrongPeer {
		t.Fatalf("wrong target: %v", err)
	}
	if _, _, peer, err := RespondLink(ks, v2, linkCheck(hostB)); Reason(err) != ReasonUnknownMember || peer != hostA {
		t.Fatalf("unknown host: %q %v", peer, err)
	}
	// A responder that answers as another host is refused by the initiator.
	in, msg1, _ := NewLinkInitiator(ks, hostA, hostB)
	msg2, _, _, err := RespondLink(ks, msg1, func(string, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Finish(msg2); err != nil {
		t.Fatalf("honest answer: %v", err)
	}
	in, _, _ = NewLinkInitiator(ks, hostA, hostB)
	_, other, _ := NewLinkInitiator(ks, hostA, "127.0.0.1:1")
	msg2, _, _, err = RespondLink(ks, other, func(string, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Finish(msg2); err == nil {
		t.Fatal("finished against another handshake's msg2")
	}
	if _, _, err := NewLinkInitiator(ks, "", hostB); err == nil {
		t.Fatal("empty host id accepted")
	}
	if _, _, err := NewLinkInitiator(ks, hostA, string(make([]byte, MaxHostIDLen+1))); err == nil {
		t.Fatal("oversized host id accepted")
	}
}

// TestLinkMsg2AnswersTheDialledHost: msg2 of a responder that answers as another host than
// the one dialled fails Finish with ErrWrongPeer (the responder's own check is bypassed here).
func TestLinkMsg2AnswersTheDialledHost(t *testing.T) {
	ks := keySet(t, newKey(t))
	in, msg1, _ := NewLinkInitiator(ks, hostA, hostB)
	hs, err := newLinkHandshake(&ks.keys[0], false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := hs.ReadMessage(nil, msg1[1:]); err != nil {
		t.Fatal(err)
	}
	msg2, _, _, err := hs.WriteMessage(nil, appendID(nil, "127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Finish(msg2); !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("Finish: %v", err)
	}
}

// FuzzRespondLink: arbitrary bytes as a host link's msg1 never panic, and every refusal has
// a known reason.
func FuzzRespondLink(f *testing.F) {
	ks := fuzzKeys(f)
	_, good, err := NewLinkInitiator(ks, hostA, hostB)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{VersionLink})
	f.Add(append([]byte{VersionLink}, make([]byte, msg1MaxLen)...))
	f.Fuzz(func(t *testing.T, msg1 []byte) {
		msg2, s, _, err := RespondLink(ks, msg1, func(string, string) error { return nil })
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
