package secure

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flynn/noise"
)

const testGroup = "g1"

func newKey(t testing.TB) [KeySize]byte {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keySet(t testing.TB, primary [KeySize]byte, accepted ...[KeySize]byte) KeySet {
	t.Helper()
	ks, err := NewKeySet(primary, accepted...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func acceptAll(string) bool { return true }

// members accepts the ids given.
func members(ids ...string) func(string) bool {
	return func(id string) bool {
		for _, m := range ids {
			if m == id {
				return true
			}
		}
		return false
	}
}

// pair runs a whole handshake, a dialling b, and fails the test on any error.
func pair(t testing.TB, ik, rk KeySet) (a, b *Session) {
	t.Helper()
	in, msg1, err := NewInitiator(ik, testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	msg2, b, peer, err := Respond(rk, testGroup, "b", msg1, members("a", "c"))
	if err != nil {
		t.Fatalf("Respond: %v", err)
	}
	if peer != "a" || b.PeerID() != "a" {
		t.Fatalf("responder sees peer %q / %q, want a", peer, b.PeerID())
	}
	a, err = in.Finish(msg2)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if a.PeerID() != "b" {
		t.Fatalf("initiator sees peer %q, want b", a.PeerID())
	}
	return a, b
}

// roundTrip seals msg on from and opens it on to.
func roundTrip(t *testing.T, from, to *Session, msg string) {
	t.Helper()
	ct, err := from.Seal(nil, []byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if len(ct) != len(msg)+Overhead || bytes.Contains(ct, []byte(msg)) {
		t.Fatalf("sealed frame %x does not hide %q", ct, msg)
	}
	pt, err := to.Open(nil, ct)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if string(pt) != msg {
		t.Fatalf("opened %q, want %q", pt, msg)
	}
}

func wantErr(t *testing.T, err, want error, reason string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if got := Reason(err); got != reason {
		t.Fatalf("Reason(%v) = %q, want %q", err, got, reason)
	}
}

func TestHandshakeAndFramesBothWays(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	if a.KeyID() != b.KeyID() || a.KeyID() != KeyID(k.Primary()) {
		t.Fatalf("key ids %s %s, want %s", a.KeyID(), b.KeyID(), KeyID(k.Primary()))
	}
	for i := range 3 {
		roundTrip(t, a, b, fmt.Sprintf("request %d", i))
		roundTrip(t, b, a, fmt.Sprintf("response %d", i))
	}
	// Same plaintext, different frames: the counter is in the nonce.
	x, _ := a.Seal(nil, []byte("hb"))
	y, _ := a.Seal(nil, []byte("hb"))
	if bytes.Equal(x, y) {
		t.Fatal("two seals of the same plaintext are equal")
	}
}

func TestWrongKeyRefused(t *testing.T) {
	_, msg1, err := NewInitiator(keySet(t, newKey(t)), testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	msg2, s, _, err := Respond(keySet(t, newKey(t)), testGroup, "b", msg1, acceptAll)
	wantErr(t, err, ErrBadKey, ReasonBadKey)
	if msg2 != nil || s != nil {
		t.Fatal("a refused handshake returned a msg2 or a session")
	}
}

func TestWrongGroupRefused(t *testing.T) {
	k := keySet(t, newKey(t))
	_, msg1, err := NewInitiator(k, "other-group", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = Respond(k, testGroup, "b", msg1, acceptAll)
	wantErr(t, err, ErrBadKey, ReasonBadKey) // indistinguishable from a wrong key
}

func TestUnknownMemberRefused(t *testing.T) {
	k := keySet(t, newKey(t))
	_, msg1, err := NewInitiator(k, testGroup, "intruder", "b")
	if err != nil {
		t.Fatal(err)
	}
	msg2, s, peer, err := Respond(k, testGroup, "b", msg1, members("a", "c"))
	wantErr(t, err, ErrUnknownMember, ReasonUnknownMember)
	if peer != "intruder" || msg2 != nil || s != nil {
		t.Fatalf("peer %q msg2 %x session %v", peer, msg2, s)
	}
	_, _, _, err = Respond(k, testGroup, "b", msg1, nil) // nil accept refuses everyone
	wantErr(t, err, ErrUnknownMember, ReasonUnknownMember)
}

// A msg1 meant for b does not open a session on c (an address pointing at the wrong member).
func TestResponderRefusesMsg1ForAnotherMember(t *testing.T) {
	k := keySet(t, newKey(t))
	_, msg1, err := NewInitiator(k, testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	_, _, peer, err := Respond(k, testGroup, "c", msg1, acceptAll)
	wantErr(t, err, ErrWrongPeer, ReasonWrongPeer)
	if peer != "a" {
		t.Fatalf("peer = %q", peer)
	}
}

// respondAs answers msg1 as a member that holds the key but claims id and skips the target
// check: a misbehaving or older member, written with noise directly.
func respondAs(t *testing.T, key [KeySize]byte, id string, msg1 []byte) []byte {
	t.Helper()
	hs, err := newHandshake(&key, testGroup, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := hs.ReadMessage(nil, msg1[1:]); err != nil {
		t.Fatal(err)
	}
	msg2, _, _, err := hs.WriteMessage(nil, appendID(nil, id))
	if err != nil {
		t.Fatal(err)
	}
	return msg2
}

func TestInitiatorRefusesWrongResponder(t *testing.T) {
	key := newKey(t)
	in, msg1, err := NewInitiator(keySet(t, key), testGroup, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	s, err := in.Finish(respondAs(t, key, "c", msg1))
	wantErr(t, err, ErrWrongPeer, ReasonWrongPeer)
	if s != nil {
		t.Fatal("session returned")
	}

	// The same responder answering as b is accepted: the refusal above was about the id.
	in, msg1, _ = NewInitiator(keySet(t, key), testGroup, "a", "b")
	if _, err := in.Finish(respondAs(t, key, "b", msg1)); err != nil {
		t.Fatal(err)
	}
}

func TestFinishOnlyOnce(t *testing.T) {
	k := keySet(t, newKey(t))
	in, msg1, _ := NewInitiator(k, testGroup, "a", "b")
	msg2, _, _, err := Respond(k, testGroup, "b", msg1, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Finish(msg2); err != nil {
		t.Fatal(err)
	}
	_, err = in.Finish(msg2)
	wantErr(t, err, ErrMalformed, ReasonMalformed)
}

func TestTamperedMsg2Refused(t *testing.T) {
	k := keySet(t, newKey(t))
	in, msg1, _ := NewInitiator(k, testGroup, "a", "b")
	msg2, _, _, err := Respond(k, testGroup, "b", msg1, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	msg2[len(msg2)-1] ^= 1
	_, err = in.Finish(msg2)
	wantErr(t, err, ErrBadKey, ReasonBadKey)
}

func TestReplayedFrameFails(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	f1, _ := a.Seal(nil, []byte("heartbeat 1"))
	if _, err := b.Open(nil, f1); err != nil {
		t.Fatal(err)
	}
	_, err := b.Open(nil, f1)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
	// A failure is fatal: even the genuine next frame no longer opens.
	f2, _ := a.Seal(nil, []byte("heartbeat 2"))
	_, err = b.Open(nil, f2)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
}

func TestReorderedFramesFail(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	f1, _ := a.Seal(nil, []byte("vote"))
	f2, _ := a.Seal(nil, []byte("heartbeat"))
	_, err := b.Open(nil, f2) // f1 reordered after f2, or dropped
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
	_, err = b.Open(nil, f1)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
}

// A frame sealed for one direction does not open in the other (each has its own key).
func TestReflectedFrameFails(t *testing.T) {
	k := keySet(t, newKey(t))
	a, _ := pair(t, k, k)
	f, _ := a.Seal(nil, []byte("vote"))
	_, err := a.Open(nil, f)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
}

func TestTamperedOrShortFrameFails(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	f, _ := a.Seal(nil, []byte("heartbeat"))
	f[0] ^= 0x80
	_, err := b.Open(nil, f)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)

	a, b = pair(t, k, k)
	_, err = b.Open(nil, make([]byte, Overhead-1))
	wantErr(t, err, ErrMalformed, ReasonMalformed)
	f, _ = a.Seal(nil, nil) // an empty body is a valid frame...
	_, err = b.Open(nil, f)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt) // ...but the session broke on the short one
}

// A captured msg1 replayed on a new connection gets a msg2 and a session, but the replayer,
// who lacks the initiator's ephemeral private key, can not make or reuse a frame that opens.
func TestReplayedMsg1CannotProduceFrames(t *testing.T) {
	k := keySet(t, newKey(t))
	in, msg1, _ := NewInitiator(k, testGroup, "a", "b")
	msg2, b, _, err := Respond(k, testGroup, "b", msg1, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	a, err := in.Finish(msg2)
	if err != nil {
		t.Fatal(err)
	}
	captured, _ := a.Seal(nil, []byte("heartbeat term 7"))
	if _, err := b.Open(nil, captured); err != nil {
		t.Fatal(err)
	}

	// The attacker's new connection to b.
	replayMsg2, b2, peer, err := Respond(k, testGroup, "b", msg1, acceptAll)
	if err != nil || peer != "a" {
		t.Fatalf("replayed msg1: err %v peer %q; the responder answers it, as designed", err, peer)
	}
	if bytes.Equal(replayMsg2, msg2) {
		t.Fatal("the responder's ephemeral key was not fresh")
	}
	// The captured frame, and any frame sealed with the original session's keys, fail.
	_, err = b2.Open(nil, captured)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)
	b3 := mustRespond(t, k, msg1)
	other, _ := a.Seal(nil, []byte("heartbeat term 8"))
	_, err = b3.Open(nil, other)
	wantErr(t, err, ErrDecrypt, ReasonDecrypt)

	// And a captured msg2 does not finish someone else's handshake either.
	in2, _, _ := NewInitiator(k, testGroup, "a", "b")
	_, err = in2.Finish(msg2)
	wantErr(t, err, ErrBadKey, ReasonBadKey)
}

func mustRespond(t *testing.T, k KeySet, msg1 []byte) *Session {
	t.Helper()
	_, s, _, err := Respond(k, testGroup, "b", msg1, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	onlyOld, onlyNew := keySet(t, oldKey), keySet(t, newK)
	step1 := keySet(t, oldKey, newK) // new accepted, old primary
	step2 := keySet(t, newK, oldKey) // new primary, old accepted

	for _, c := range []struct {
		name        string
		dial, serve KeySet
		usedKey     [KeySize]byte
	}{
		{"old member dials a swapped member", onlyOld, step2, oldKey},
		{"new member dials a swapped member", onlyNew, step2, newK},
		{"swapped member dials a step-1 member", step2, step1, newK},
		{"step-1 member dials a swapped member", step1, step2, oldKey},
		{"swapped member dials an old member", step2, onlyOld, newK},
	} {
		if c.name == "swapped member dials an old member" {
			// Not part of a correct rollout (step 1 must finish first): refused.
			_, msg1, _ := NewInitiator(c.dial, testGroup, "a", "b")
			_, _, _, err := Respond(c.serve, testGroup, "b", msg1, acceptAll)
			wantErr(t, err, ErrBadKey, ReasonBadKey)
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			a, b := pair(t, c.dial, c.serve)
			if a.KeyID() != KeyID(c.usedKey) || b.KeyID() != KeyID(c.usedKey) {
				t.Fatalf("key ids %s/%s, want %s", a.KeyID(), b.KeyID(), KeyID(c.usedKey))
			}
			roundTrip(t, a, b, "heartbeat")
			roundTrip(t, b, a, "ok")
		})
	}

	// Step 3 done on the responder: the old key is refused.
	_, msg1, _ := NewInitiator(onlyOld, testGroup, "a", "b")
	_, _, _, err := Respond(onlyNew, testGroup, "b", msg1, acceptAll)
	wantErr(t, err, ErrBadKey, ReasonBadKey)
}

func TestMsg1Classification(t *testing.T) {
	k := keySet(t, newKey(t))
	_, good, _ := NewInitiator(k, testGroup, "alpha", "b") // above msg1MinLen
	for _, c := range []struct {
		name   string
		msg1   []byte
		reason string
	}{
		{"empty", nil, ReasonMalformed},
		{"plaintext rpc frame (fixarray 4)", []byte{0x94, 0x01, 0xcd, 0xc7, 0x3a, 0xc2, 0x80}, ReasonPlaintext},
		{"plaintext array16", []byte{0xdc, 0, 4}, ReasonPlaintext},
		{"newer version", append([]byte{2}, good[1:]...), ReasonVersion},
		{"garbage first byte", append([]byte{0x55}, good[1:]...), ReasonMalformed},
		{"truncated", good[:msg1MinLen-1], ReasonMalformed},
		{"too long", append(append([]byte(nil), good...), make([]byte, msg1MaxLen)...), ReasonMalformed},
		{"one byte short", good[:len(good)-1], ReasonBadKey},
		{"tampered payload", flip(good, len(good)-20), ReasonBadKey},
		{"tampered ephemeral", flip(good, 5), ReasonBadKey},
	} {
		_, s, _, err := Respond(k, testGroup, "b", c.msg1, acceptAll)
		if s != nil || Reason(err) != c.reason {
			t.Errorf("%s: err %v (reason %q), want reason %q", c.name, err, Reason(err), c.reason)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}

func TestConfigurationErrors(t *testing.T) {
	k := keySet(t, newKey(t))
	long := strings.Repeat("x", MaxIDLen+1)
	for _, c := range []struct {
		keys                KeySet
		group, self, remote string
	}{
		{KeySet{}, testGroup, "a", "b"},
		{k, "", "a", "b"},
		{k, strings.Repeat("g", MaxGroupLen+1), "a", "b"},
		{k, testGroup, "", "b"},
		{k, testGroup, "a", ""},
		{k, testGroup, long, "b"},
		{k, testGroup, "a", long},
	} {
		if _, _, err := NewInitiator(c.keys, c.group, c.self, c.remote); err == nil || Reason(err) != ReasonOther {
			t.Errorf("NewInitiator(%d keys, %q, %q, %q): err %v", c.keys.Len(), c.group, c.self, c.remote, err)
		}
	}
	_, msg1, _ := NewInitiator(k, testGroup, "a", "b")
	if _, _, _, err := Respond(KeySet{}, testGroup, "b", msg1, acceptAll); err == nil {
		t.Error("Respond without a key succeeded")
	}
	if _, _, _, err := Respond(k, testGroup, long, msg1, acceptAll); err == nil {
		t.Error("Respond with an oversized self id succeeded")
	}
}

func TestKeySet(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	if _, err := NewKeySet([KeySize]byte{}); err == nil {
		t.Error("zero key accepted")
	}
	if _, err := NewKeySet(k1, k2, k1); err == nil {
		t.Error("duplicate key accepted")
	}
	many := make([][KeySize]byte, MaxKeys)
	for i := range many {
		many[i] = newKey(t)
	}
	if _, err := NewKeySet(k1, many...); err == nil {
		t.Errorf("%d keys accepted", MaxKeys+1)
	}
	ks := keySet(t, k1, k2)
	if ks.Primary() != k1 || ks.Len() != 2 {
		t.Fatal("primary or length")
	}
	keys := ks.Keys()
	keys[0] = k2 // a copy: the set is not changed
	if ks.Primary() != k1 {
		t.Fatal("Keys returned the set's own slice")
	}
	if ids := ks.IDs(); len(ids) != 2 || ids[0] != KeyID(k1) || len(ids[0]) != 8 || ids[0] == ids[1] {
		t.Fatalf("ids %v", ids)
	}
}

func TestReason(t *testing.T) {
	if Reason(nil) != "" || Reason(errors.New("x")) != ReasonOther {
		t.Fatal("nil or foreign error")
	}
	if Reason(fmt.Errorf("rpc: handshake with 10.0.0.1: %w", ErrUnknownMember)) != ReasonUnknownMember {
		t.Fatal("wrapped error")
	}
}

// Our transport is Noise's: the frames are those noise.CipherState makes and opens, for the
// same key and counter (the nonce layout and the absent associated data match).
func TestSessionMatchesNoise(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	ours := newSession("b", "", noise.UnsafeNewCipherState(suite, k1, 0), noise.UnsafeNewCipherState(suite, k2, 0))
	refSend := noise.UnsafeNewCipherState(suite, k1, 0)
	refRecv := noise.UnsafeNewCipherState(suite, k2, 0)
	for i := range 5 {
		pt := []byte(fmt.Sprintf("frame %d", i))
		got, err := ours.Seal(nil, pt)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := refSend.Encrypt(nil, nil, pt)
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: sealed %x, noise %x", i, got, want)
		}
		ct, _ := refRecv.Encrypt(nil, nil, pt) // what the peer's noise would send
		opened, err := ours.Open(nil, ct)
		if err != nil || !bytes.Equal(opened, pt) {
			t.Fatalf("frame %d: open %q, %v", i, opened, err)
		}
	}
}

func TestSealInPlaceAndLimits(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	buf := make([]byte, 5, 5+Overhead)
	copy(buf, "hello")
	ct, err := a.Seal(buf[:0], buf)
	if err != nil || &ct[0] != &buf[0] {
		t.Fatalf("in-place seal: %v, reallocated %v", err, &ct[0] != &buf[0])
	}
	pt, err := b.Open(ct[:0], ct)
	if err != nil || string(pt) != "hello" {
		t.Fatalf("in-place open: %q %v", pt, err)
	}

	_, err = a.Seal(nil, make([]byte, MaxMessageLen-Overhead+1))
	wantErr(t, err, ErrTooLarge, ReasonTooLarge)
	big, err := a.Seal(nil, make([]byte, MaxMessageLen-Overhead)) // the refusal consumed nothing
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(nil, big); err != nil {
		t.Fatal(err)
	}
	_, err = b.Open(nil, make([]byte, MaxMessageLen+1))
	wantErr(t, err, ErrMalformed, ReasonMalformed)
}

func TestCounterExhausted(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	a.send.n, b.recv.n = maxCounter, maxCounter
	f, err := a.Seal(nil, []byte("last")) // the last counter is usable
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(nil, f); err != nil {
		t.Fatal(err)
	}
	_, err = a.Seal(nil, []byte("one too many"))
	wantErr(t, err, ErrExhausted, ReasonExhausted)
	_, err = b.Open(nil, f)
	wantErr(t, err, ErrExhausted, ReasonExhausted)
}

// Seal and Open of one session may run at the same time (the server seals replies on worker
// goroutines while its event loop opens requests); -race checks they share nothing.
func TestSealAndOpenConcurrently(t *testing.T) {
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	const n = 200
	toB := make([][]byte, n)
	for i := range toB {
		toB[i], _ = a.Seal(nil, []byte("request"))
	}
	var wg sync.WaitGroup
	wg.Add(2)
	var sealErr, openErr error
	toA := make([][]byte, n)
	go func() {
		defer wg.Done()
		for i := range toA {
			if toA[i], sealErr = b.Seal(nil, []byte("response")); sealErr != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for _, f := range toB {
			if _, openErr = b.Open(nil, f); openErr != nil {
				return
			}
		}
	}()
	wg.Wait()
	if sealErr != nil || openErr != nil {
		t.Fatal(sealErr, openErr)
	}
	for _, f := range toA {
		if _, err := a.Open(nil, f); err != nil {
			t.Fatal(err)
		}
	}
}

// A heartbeat must cost no allocation to seal and open once the caller's buffers exist: with
// noise.CipherState it would cost two (its nonce escapes to the heap on every call).
func TestSealOpenDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	k := keySet(t, newKey(t))
	a, b := pair(t, k, k)
	body := make([]byte, 100)
	sealed := make([]byte, 0, len(body)+Overhead)
	opened := make([]byte, 0, len(body))
	allocs := testing.AllocsPerRun(100, func() {
		ct, _ := a.Seal(sealed[:0], body)
		if _, err := b.Open(opened[:0], ct); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Seal+Open allocate %v times", allocs)
	}
}
