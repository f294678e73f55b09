package secure

import "testing"

// BenchmarkHandshake is a whole handshake, both sides: what each new connection costs.
func BenchmarkHandshake(b *testing.B) {
	ks := keySet(b, newKey(b))
	b.ReportAllocs()
	for b.Loop() {
		in, msg1, err := NewInitiator(ks, testGroup, "n0", "n1")
		if err != nil {
			b.Fatal(err)
		}
		msg2, _, _, err := Respond(ks, testGroup, "n1", msg1, acceptAll)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.Finish(msg2); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRespondWrongKey is what refusing a stranger's msg1 costs a responder that
// accepts two keys (a rotation in progress): a bound on what a connection flood can make it
// spend per handshake.
func BenchmarkRespondWrongKey(b *testing.B) {
	ks := keySet(b, newKey(b), newKey(b))
	_, msg1, err := NewInitiator(keySet(b, newKey(b)), testGroup, "n0", "n1")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := Respond(ks, testGroup, "n1", msg1, acceptAll); err != ErrBadKey {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealOpenHeartbeat seals and opens a heartbeat-sized body (100 bytes) with
// caller-provided buffers, as the rpc layer's pooled frame buffers would.
func BenchmarkSealOpenHeartbeat(b *testing.B) {
	ks := keySet(b, newKey(b))
	a, r := pair(b, ks, ks)
	body := make([]byte, 100)
	sealed := make([]byte, 0, len(body)+Overhead)
	opened := make([]byte, 0, len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ct, err := a.Seal(sealed[:0], body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Open(opened[:0], ct); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStaticHandshake is a whole member-key handshake (version 3, Noise XX), both sides:
// what each new connection costs the two members together (each side does one key
// generation and three X25519 operations).
func BenchmarkStaticHandshake(b *testing.B) {
	tr := newTrio(b)
	accept := acceptGroup("b", "a")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := staticPair(tr.ids["a"], "a", "b", tr.ids["b"], accept); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStaticRefuseUnknownID is what a listener spends refusing a msg1 from an id that is
// no member: msg1 is read in clear, so no Diffie-Hellman.
func BenchmarkStaticRefuseUnknownID(b *testing.B) {
	tr := newTrio(b)
	_, msg1, err := NewStaticInitiator(tr.ids["a"], testGroup, "a", "b")
	if err != nil {
		b.Fatal(err)
	}
	refuse := acceptGroup("b", "c")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, _, _, err := RespondStatic(tr.ids["b"], msg1, refuse); err == nil {
			b.Fatal("accepted")
		}
	}
}
