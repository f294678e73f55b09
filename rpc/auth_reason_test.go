package rpc

import (
	"math/rand/v2"
	"testing"

	"github.com/dledger-go/dledger/rpc/secure"
)

// TestAuthReasonOfStrangers: what dledger_auth_failures_total{reason} says of traffic that is
// no member's at all. An HTTP request on the rpc port and random bytes are malformed; plaintext
// is kept for what it tells an operator: a member running without a key (an rpc envelope in a
// frame of a size the protocol allows; TestAuthOversizedFirstFrame sends one).
func TestAuthReasonOfStrangers(t *testing.T) {
	keys := newKeys(t)
	var reasons reasonCounter
	s := keyedServer(t, &fakeHandler{}, keys, &reasons, nil)
	inputs := map[string][]byte{
		"an HTTP request": []byte("GET /metrics HTTP/1.1\r\nHost: dledger\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n\r\n"),
	}
	r := rand.New(rand.NewPCG(33, 1))
	for i := 0; i < 8; i++ {
		b := make([]byte, 64)
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		// The bytes after the length look like the start of an rpc envelope (a msgpack array):
		// the random inputs a one-byte test mistook for a keyless member.
		b[frameHeaderLen] = []byte{0x94, 0x9f, 0xdc, 0xdd}[i%4]
		inputs["64 random bytes #"+string(rune('0'+i))] = b
	}
	for what, in := range inputs {
		before := reasons.get(secure.ReasonMalformed)
		conn := dialRaw(t, s.Addr())
		if _, err := conn.Write(in); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, conn, what)
		eventually(t, what+" counted as malformed", func() bool { return reasons.get(secure.ReasonMalformed) == before+1 })
		if n := reasons.get(secure.ReasonPlaintext); n != 0 {
			t.Fatalf("%s: counted as plaintext (%d)", what, n)
		}
	}
}
