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
