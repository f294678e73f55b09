package rpc

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame decoder, both as a stream of frames (as
// a server connection reads them) and as one body, in both directions. It must never panic
// or allocate beyond the frame (the validator guards the library), and whatever it accepts
// must (1) have passed the validator, (2) survive an encode/decode round trip unchanged and
// (3) be what the msgpack library makes of the message bytes on its own: the production
// decoder adds checks in front of the library, never a different reading. The seed corpus
// is in testdata/fuzz/FuzzDecodeFrame.
func FuzzDecodeFrame(f *testing.F) {
	for _, mc := range append(msgCases, hostCases...) {
		f.Add(frameOf(mc, 1, mc.newMsg()))
	}
	f.Add(frameOf(hostCases[0], 2, &protocol.HostHeartBeatRequest{Incarnation: 3, Seq: 1,
		Changes: []protocol.HostChange{{Group: "g", Member: "n0", Epoch: 2}}}))
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
	var c frameDecoder
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
	for _, mc := range append(msgCases, hostCases...) {
		if mc.code == code && mc.resp == resp {
			return mc
		}
	}
	panic("no msgCase")
}

func checkAccepted(t *testing.T, body []byte, mc msgCase, id uint64, got any) {
	// (1) Nothing reaches the library without passing the validator.
	if err := validate(body); err != nil {
		t.Fatalf("accepted a body the validator refuses: %v", err)
	}

	// (2) Re-encode what we decoded; decoding that must give the same message.
	frame := frameOf(mc, id, got)
	againID, again, err := decodeBody(mc, frame[frameHeaderLen:])
	if err != nil || againID != id || !reflect.DeepEqual(again, got) {
		t.Fatalf("round trip changed %+v into %+v (%v)", got, again, err)
	}

	// (3) The library alone must read the message bytes the same way. The body passed
	// validation, so its length headers are honest and the library can not over-allocate.
	msg := messageOf(body)
	lib := mc.newMsg()
	if err := msgpack.Unmarshal(msg, lib); err != nil {
		t.Fatalf("we accepted a message the library refuses: %v\n% x", err, msg)
	}
	if !reflect.DeepEqual(lib, got) {
		t.Fatalf("library reads %+v, we read %+v\n% x", lib, got, msg)
	}
}
