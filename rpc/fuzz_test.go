package rpc

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame decoder, both as a stream of frames (as
// a server connection reads them) and as one body, in both directions. It must never panic
// or allocate beyond the frame, and whatever it accepts must (1) survive an encode/decode
// round trip unchanged and (2) decode to the same struct with the msgpack library, the
// reference for what the bytes mean. The seed corpus is in testdata/fuzz/FuzzDecodeFrame.
func FuzzDecodeFrame(f *testing.F) {
	for _, mc := range msgCases {
		f.Add(frameOf(mc, 1, mc.newMsg()))
	}
	for _, h := range hostileBodies {
		f.Add(frameWith(h.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for rest := data; len(rest) >= frameHeaderLen; {
			n, err := frameLength(rest, DefaultMaxFrameSize)
			if err != nil || len(rest) < frameHeaderLen+n {
				break
			}
			checkBody(t, rest[frameHeaderLen:frameHeaderLen+n])
			rest = rest[frameHeaderLen+n:]
		}
		checkBody(t, data)
	})
}

func checkBody(t *testing.T, body []byte) {
	var c cursor
	var req request
	if err := c.decodeRequest(body, &req); err == nil {
		mc := caseFor(req.code, false)
		checkAccepted(t, body, mc, req.id, mc.fromReq(&req))
	}
	var rsp response
	if err := c.decodeResponse(body, &rsp); err == nil {
		mc := caseFor(rsp.code, true)
		checkAccepted(t, body, mc, rsp.id, mc.fromRsp(&rsp))
	}
}

func caseFor(code protocol.RequestCode, resp bool) msgCase {
	for _, mc := range msgCases {
		if mc.code == code && mc.resp == resp {
			return mc
		}
	}
	panic("no msgCase")
}

func checkAccepted(t *testing.T, body []byte, mc msgCase, id uint64, got any) {
	// (1) Re-encode what we decoded; decoding that must give the same message.
	frame := frameOf(mc, id, got)
	var c cursor
	again := mc.newMsg()
	env, err := c.openEnvelope(frame[frameHeaderLen:])
	if err != nil || env.id != id {
		t.Fatalf("re-encoded frame refused: %v", err)
	}
	if err := mc.decode(&c, again); err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("round trip changed %+v into %+v (%v)", got, again, err)
	}

	// (2) The library must read the message bytes the same way. The body passed validation,
	// so its length headers are honest and the library can not be made to over-allocate.
	c.reset(body)
	if _, err := c.openEnvelope(body); err != nil {
		t.Fatal(err)
	}
	start := len(body) - len(c.b)
	if err := c.skip(); err != nil {
		t.Fatal(err)
	}
	msg := body[start : len(body)-len(c.b)]
	lib := mc.newMsg()
	if err := msgpack.Unmarshal(msg, lib); err != nil {
		t.Fatalf("we accepted a message the library refuses: %v\n% x", err, msg)
	}
	if !reflect.DeepEqual(lib, got) {
		t.Fatalf("library reads %+v, we read %+v\n% x", lib, got, msg)
	}
}
