package rpc

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// fastValues are value encodings a message field may meet: every integer form, nil, both
// booleans, strings in each form, binary, a float and an array (which no field takes).
var fastValues = [][]byte{
	{0x05}, {0xff}, {0x00}, {0xcc, 0xff}, {0xd0, 0x80}, {0xcd, 0x12, 0x34}, {0xd1, 0x80, 0x00},
	{0xce, 0x80, 0, 0, 1}, {0xd2, 0x80, 0, 0, 1}, {0xcf, 0, 0, 0, 0, 0, 0, 1, 0},
	{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe},
	{0xc0}, {0xc2}, {0xc3}, {0xa2, 'n', '1'}, {0xd9, 2, 'n', '2'}, {0xda, 0, 1, 'x'},
	{0xc4, 2, 'n', '3'}, {0xa0}, {0xca, 0x3f, 0x80, 0, 0}, {0x91, 0x01}, {0x80},
}

// fastKeys are every key of the four messages the fast decoder reads, and keys it leaves to
// the library.
var fastKeys = []string{"group", "remoteId", "localId", "leaderId", "term", "code", "ledgerEndTerm",
	"ledgerEndIndex", "confEpoch", "confTerm", "probe", "voteResult", "successors", "epoch",
	"ledgerUnknown", "commitEpoch", "commitTerm", "conf", "pending", "unknownKey", "Term"}

// bodyWithMessage is a frame body of code and direction whose message is the raw map msg.
func bodyWithMessage(code protocol.RequestCode, resp bool, msg []byte) []byte {
	var b bytes.Buffer
	e := msgpack.NewEncoder(&b)
	_ = e.EncodeArrayLen(envelopeLen)
	_ = e.EncodeUint(9)
	_ = e.EncodeInt(int64(code))
	_ = e.EncodeBool(resp)
	return append(b.Bytes(), msg...)
}

func strKey(k string) []byte { return append([]byte{0xa0 | byte(len(k))}, k...) }

// Issue 29: the fast decoder (codec_fast.go) must read every message exactly as the library
// does, or leave it to the library: for each field of the four messages in every value form,
// alone, repeated and beside a well-formed message, the production decoder accepts what the
// library accepts (and the bounds allow) and reads the same message, and refuses the rest.
func TestFastDecodeReadsAsTheLibrary(t *testing.T) {
	plain := map[string][]byte{}
	for _, mc := range msgCases[:4] {
		plain[mc.name] = messageOf(frameOf(mc, 1, mc.newMsg())[frameHeaderLen:])
	}
	n := 0
	for _, mc := range msgCases[:4] {
		for _, k := range fastKeys {
			for _, v := range fastValues {
				one := append(append([]byte{0x81}, strKey(k)...), v...)
				two := append(append([]byte{0x82}, one[1:]...), one[1:]...)
				base := plain[mc.name]
				withBase := append([]byte{base[0] + 1}, base[1:]...) // base is a fixmap
				withBase = append(append(withBase, strKey(k)...), v...)
				for _, msg := range [][]byte{one, two, withBase} {
					compareWithLibrary(t, mc, msg)
					n++
				}
			}
		}
		// A key written as binary, and a map16 header: the library's reading either way.
		compareWithLibrary(t, mc, append([]byte{0x81, 0xc4, 4, 't', 'e', 'r', 'm'}, 0x07))
		compareWithLibrary(t, mc, append([]byte{0xde, 0, 1}, append(strKey("term"), 0x07)...))
	}
	if n == 0 {
		t.Fatal("no case ran")
	}
}

func compareWithLibrary(t *testing.T, mc msgCase, msg []byte) {
	t.Helper()
	body := bodyWithMessage(mc.code, mc.resp, msg)
	_, got, err := decodeBody(mc, body)
	lib := mc.newMsg()
	libErr := msgpack.Unmarshal(msg, lib)
	if libErr == nil && (!inBounds(lib) || !confInBounds(lib)) {
		libErr = errOutOfRange
	}
	switch {
	case (err == nil) != (libErr == nil):
		t.Fatalf("% x: we say %v, the library %v", msg, err, libErr)
	case err == nil && !reflect.DeepEqual(got, lib):
		t.Fatalf("% x: we read %+v, the library %+v", msg, got, lib)
	}
}

// The id cache returns the string it holds for bytes it has seen, and keeps no long string.
func TestIDCache(t *testing.T) {
	var c idCache
	a := c.get([]byte("n1"))
	if b := c.get([]byte("n1")); b != "n1" || !sameString(a, b) {
		t.Fatalf("second n1: %q, same backing: %v", b, sameString(a, b))
	}
	long := bytes.Repeat([]byte("x"), idCacheMax+1)
	if s := c.get(long); s != string(long) {
		t.Fatal(s)
	}
	for _, s := range c.s {
		if len(s) > idCacheMax {
			t.Fatalf("kept a %d-byte string", len(s))
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = c.get([]byte("n1")) }); allocs != 0 {
		t.Fatalf("%v allocations for a cached id", allocs)
	}
}

func sameString(a, b string) bool {
	return len(a) > 0 && len(a) == len(b) && unsafeData(a) == unsafeData(b)
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }

// Issue 29: the fast encoder (codec_fast_enc.go) writes the bytes the library writes for the
// same message, for every value size (each integer and string form), and leaves every other
// form to the library.
func TestFastEncodeWritesAsTheLibrary(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, protocol.MaxTerm, -1, -32, -33, -128, -129,
		-32768, -32769, -1 << 31, -1<<31 - 1}
	strs := []string{"", "n1", string(bytes.Repeat([]byte("g"), 31)), string(bytes.Repeat([]byte("g"), 32)),
		string(bytes.Repeat([]byte("g"), 255)), string(bytes.Repeat([]byte("g"), 256)), string(bytes.Repeat([]byte("g"), 70000))}
	var msgs []any
	for i, n := range ints {
		s := strs[i%len(strs)]
		h := protocol.Header{Group: s, RemoteID: strs[(i+1)%len(strs)], LocalID: "n0", LeaderID: s, Term: n,
			Code: protocol.ResponseCode(n)}
		msgs = append(msgs,
			&protocol.VoteRequest{Header: h, LedgerEndTerm: n, LedgerEndIndex: -n},
			&protocol.VoteRequest{Header: h, ConfEpoch: uint64(i)}, // not plain: the library's
			&protocol.VoteRequest{Header: h, Probe: true},
			&protocol.VoteResponse{Header: h, VoteResult: protocol.VoteResult(n)},
			&protocol.VoteResponse{Header: h, Conf: &protocol.WireConfig{Voters: s}},
			&protocol.HeartBeatRequest{Header: h, Successors: s},
			&protocol.HeartBeatRequest{Header: h, Successors: s, Epoch: uint64(n)},
			&protocol.HeartBeatRequest{Header: h, ConfEpoch: 3, ConfTerm: n},
			&protocol.HeartBeatResponse{Header: h, LedgerEndTerm: n, LedgerEndIndex: n - 1},
			&protocol.HeartBeatResponse{Header: h, LedgerEndTerm: n, Epoch: uint64(n)},
			&protocol.HeartBeatResponse{Header: h, LedgerUnknown: true},
			&protocol.HeartBeatResponse{Header: h, CommitEpoch: 1, CommitTerm: n},
			&protocol.MetadataRequest{Header: h})
	}
	fast := 0
	for _, m := range msgs {
		encodedAsTheLibrary(t, m)
		if _, ok := fastEncode(nil, m); ok {
			fast++
		}
	}
	if fast < len(ints)*6 {
		t.Fatalf("the fast encoder wrote %d of the messages, want the %d plain ones", fast, len(ints)*6)
	}
}

// The envelope is written by hand too (encodeInto): the library's bytes for every id size,
// request code and direction.
func TestEnvelopeWritesAsTheLibrary(t *testing.T) {
	msg := &protocol.MetadataRequest{Header: protocol.Header{Group: "g", RemoteID: "n1", LocalID: "n0"}}
	for _, id := range []uint64{0, 1, 127, 128, 255, 256, 1 << 16, 1 << 32, 1<<64 - 1} {
		for _, code := range []protocol.RequestCode{protocol.RequestVote, protocol.RequestHeartBeat, protocol.RequestMetadata,
			protocol.RequestHostHeartBeat, 0, -1, -40000} {
			for _, resp := range []bool{false, true} {
				var lib bytes.Buffer
				e := msgpack.NewEncoder(&lib)
				e.UseCompactInts(true)
				_ = e.EncodeArrayLen(envelopeLen)
				_ = e.EncodeUint(id)
				_ = e.EncodeInt(int64(code))
				_ = e.EncodeBool(resp)
				_ = encodeMessage(e, msg)
				fb := newFrameBuf()
				if err := encodeInto(fb, id, code, resp, msg, DefaultMaxFrameSize); err != nil {
					t.Fatal(err)
				}
				if got := fb.b[frameHeaderLen:]; !bytes.Equal(got, lib.Bytes()) {
					t.Fatalf("id %d code %d response %v: we write % x, the library % x", id, code, resp, got, lib.Bytes())
				}
			}
		}
	}
}

// Host heartbeats (codec_fast_host.go): written in the library's bytes, with and without each
// optional field, for lists of changes of every header size, nil and empty; read as the library
// reads them, whatever the value forms.
func TestFastHostHeartBeatAsTheLibrary(t *testing.T) {
	changes := func(n int) []protocol.HostChange {
		cs := make([]protocol.HostChange, n)
		for i := range cs {
			cs[i] = protocol.HostChange{Group: fmt.Sprintf("group-%d", i), Member: "n1", Epoch: uint64(i) << (i % 40)}
		}
		return cs
	}
	h := protocol.Header{Group: "", RemoteID: "h1", LocalID: "h0", Term: 3}
	var msgs []any
	for _, cs := range [][]protocol.HostChange{nil, {}, changes(1), changes(15), changes(16), changes(300), changes(70000)} {
		for _, opt := range [][3]uint64{{}, {1, 0, 0}, {0, 1 << 40, 0}, {0, 0, 7}, {5, 6, 7}} {
			msgs = append(msgs,
				&protocol.HostHeartBeatRequest{Header: h, Incarnation: opt[2] + 1, Seq: opt[0], Changes: cs, Upto: opt[0], Sent: opt[1], From: opt[2]},
				&protocol.HostHeartBeatResponse{Header: h, Incarnation: opt[1], Seq: 9, Changes: cs, Upto: opt[0]})
		}
	}
	for _, m := range msgs {
		lib := encodedAsTheLibrary(t, m)
		mc := hostCases[0]
		if _, ok := m.(*protocol.HostHeartBeatResponse); ok {
			mc = hostCases[1]
		}
		compareWithLibrary(t, mc, lib)
	}
	// Every value form in every field, alone and beside a well-formed message, and changes whose
	// elements are not what they should be.
	keys := []string{"inc", "seq", "changes", "upto", "sent", "from", "term", "group", "localId", "x"}
	elems := [][]byte{{0x90}, {0xc0}, {0x91, 0x80}, {0x91, 0xc0}, {0x91, 0x81, 0xa1, 'g', 0xa1, 'x'}, {0x91, 0x81, 0xa1, 'e', 0xff},
		{0x91, 0x81, 0xa1, 'm', 0xc4, 1, 'n'}, {0x91, 0x81, 0xa1, 'q', 0x01}, {0x92, 0x83, 0xa1, 'g', 0xa1, 'a', 0xa1, 'm', 0xa0, 0xa1, 'e', 0x05, 0x80},
		{0xdc, 0, 1, 0x80}}
	for _, mc := range hostCases {
		base := messageOf(frameOf(mc, 1, mc.newMsg())[frameHeaderLen:])
		for _, k := range keys {
			for _, v := range append(append([][]byte{}, fastValues...), elems...) {
				one := append(append([]byte{0x81}, strKey(k)...), v...)
				withBase := append([]byte{base[0] + 1}, base[1:]...)
				withBase = append(append(withBase, strKey(k)...), v...)
				compareWithLibrary(t, mc, one)
				compareWithLibrary(t, mc, withBase)
			}
		}
		// changes twice: the library decodes the second list into the first one's elements
		// (b keeps x and 5), which is the library's reading to keep (review of hrpc).
		twice := append([]byte{0x82}, strKey("changes")...)
		twice = append(twice, 0x91, 0x83, 0xa1, 'g', 0xa1, 'a', 0xa1, 'm', 0xa1, 'x', 0xa1, 'e', 0x05)
		twice = append(append(twice, strKey("changes")...), 0x91, 0x81, 0xa1, 'g', 0xa1, 'b')
		compareWithLibrary(t, mc, twice)
	}
}

// encodedAsTheLibrary is m as the library writes it, after checking that the hand encoder
// writes the same bytes.
func encodedAsTheLibrary(t *testing.T, m any) []byte {
	t.Helper()
	var lib bytes.Buffer
	e := msgpack.NewEncoder(&lib)
	e.UseCompactInts(true)
	if err := encodeMessage(e, m); err != nil {
		t.Fatal(err)
	}
	fb := newFrameBuf()
	if err := encodeMessageInto(fb, m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fb.b, lib.Bytes()) {
		t.Fatalf("%T %+v:\nwe write      % x\nlibrary writes % x", m, m, fb.b[:min(len(fb.b), 120)], lib.Bytes()[:min(lib.Len(), 120)])
	}
	return lib.Bytes()
}
