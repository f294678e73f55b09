package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// hostCases are the host heartbeat's messages for the per-type tests that can take a list
// (FuzzDecodeFrame); msgCases' random filling knows no slices.
var hostCases = []msgCase{
	newCase[protocol.HostHeartBeatRequest, *protocol.HostHeartBeatRequest]("HostHeartBeatRequest", protocol.RequestHostHeartBeat, false,
		func(r *request) any { return &r.host }, nil),
	newCase[protocol.HostHeartBeatResponse, *protocol.HostHeartBeatResponse]("HostHeartBeatResponse", protocol.RequestHostHeartBeat, true,
		nil, func(r *response) any { return &r.host }),
}

// handHostHeartBeat is the hand-built message of a host heartbeat request or answer: the
// header's keys, then inc, seq and changes (an array of maps g, m, e), integers in their
// smallest form.
func handHostHeartBeat(h protocol.Header, inc, seq uint64, changes []protocol.HostChange) []byte {
	b := appendMapLen(nil, 9)
	for _, kv := range []struct {
		k string
		v string
	}{{"group", h.Group}, {"remoteId", h.RemoteID}, {"localId", h.LocalID}, {"leaderId", h.LeaderID}} {
		b = appendStr(appendStr(b, kv.k), kv.v)
	}
	b = appendInt(appendStr(b, "term"), h.Term)
	b = appendInt(appendStr(b, "code"), int64(h.Code))
	b = appendUint(appendStr(b, "inc"), inc)
	b = appendUint(appendStr(b, "seq"), seq)
	b = appendStr(b, "changes")
	if changes == nil {
		b = append(b, 0xc0) // nil
	} else {
		b = appendArrayLen(b, len(changes))
	}
	for _, c := range changes {
		b = appendMapLen(b, 3)
		b = appendStr(appendStr(b, "g"), c.Group)
		b = appendStr(appendStr(b, "m"), c.Member)
		b = appendUint(appendStr(b, "e"), c.Epoch)
	}
	return b
}

// TestHostHeartBeatWire: a host heartbeat and its answer are encoded as the hand-built bytes
// (header keys, inc, seq, changes as maps g/m/e), and decode back; the frame of the
// documented example (docs/protocol.md 4.1) has its exact bytes.
func TestHostHeartBeatWire(t *testing.T) {
	hdr := protocol.Header{RemoteID: "10.0.0.2:20911", LocalID: "10.0.0.1:20911"}
	changes := []protocol.HostChange{{Group: "g0", Member: "n0", Epoch: 7}, {Group: "orders-12", Member: "b1", Epoch: 1 << 40}}
	req := &protocol.HostHeartBeatRequest{Header: hdr, Incarnation: 1732665600000000000, Seq: 42, Changes: changes}
	fb, err := encodeFrame(9, protocol.RequestHostHeartBeat, false, req, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	want := append(envelopeHead(9, protocol.RequestHostHeartBeat, false), handHostHeartBeat(hdr, req.Incarnation, 42, changes)...)
	if !bytes.Equal(fb.b[frameHeaderLen:], want) {
		t.Fatalf("request:\n got % x\nwant % x", fb.b[frameHeaderLen:], want)
	}
	var fd frameDecoder
	var r request
	if err := fd.decodeRequest(fb.b[frameHeaderLen:], &r); err != nil || !reflect.DeepEqual(&r.host, req) {
		t.Fatalf("decoded %+v, %v", r.host, err)
	}
	putFrameBuf(fb)

	ack := &protocol.HostHeartBeatResponse{Header: protocol.Header{Code: protocol.CodeSuccess}, Incarnation: 5, Seq: 42}
	fb, err = encodeFrame(9, protocol.RequestHostHeartBeat, true, ack, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	want = append(envelopeHead(9, protocol.RequestHostHeartBeat, true), handHostHeartBeat(ack.Header, 5, 42, nil)...)
	if !bytes.Equal(fb.b[frameHeaderLen:], want) {
		t.Fatalf("answer:\n got % x\nwant % x", fb.b[frameHeaderLen:], want)
	}
	var rsp response
	if err := fd.decodeResponse(fb.b[frameHeaderLen:], &rsp); err != nil || !reflect.DeepEqual(&rsp.host, ack) {
		t.Fatalf("decoded %+v, %v", rsp.host, err)
	}
	putFrameBuf(fb)

	// The example of docs/protocol.md 4.1: one change, the hosts on loopback.
	ex := &protocol.HostHeartBeatRequest{Header: protocol.Header{RemoteID: "127.0.0.1:20912", LocalID: "127.0.0.1:20911"},
		Incarnation: 3, Seq: 1, Changes: []protocol.HostChange{{Group: "g", Member: "n0", Epoch: 2}}}
	fb, err = encodeFrame(1, protocol.RequestHostHeartBeat, false, ex, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	defer putFrameBuf(fb)
	const doc = "00 00 00 75 94 01 cd e6 79 c2 89 a5 67 72 6f 75 70 a0 a8 72 65 6d 6f 74 65 49 64 af 31 32 37 2e 30 2e 30 2e 31 3a 32 30 39 31 32 a7 6c 6f 63 61 6c 49 64 af 31 32 37 2e 30 2e 30 2e 31 3a 32 30 39 31 31 a8 6c 65 61 64 65 72 49 64 a0 a4 74 65 72 6d 00 a4 63 6f 64 65 00 a3 69 6e 63 03 a3 73 65 71 01 a7 63 68 61 6e 67 65 73 91 83 a1 67 a1 67 a1 6d a2 6e 30 a1 65 02"
	if got := fmt.Sprintf("% x", fb.b); got != doc {
		t.Fatalf("documented example:\n got %s\nwant %s", got, doc)
	}
}

// TestHostHeartBeatBounds: a change list above MaxHostChanges is refused by the encoder
// (nothing is sent) and, from the network, is a bad frame (out_of_range); at the bound it
// passes.
func TestHostHeartBeatBounds(t *testing.T) {
	changes := make([]protocol.HostChange, protocol.MaxHostChanges+1)
	for i := range changes {
		changes[i] = protocol.HostChange{Group: "g", Member: "m", Epoch: uint64(i)}
	}
	over := &protocol.HostHeartBeatRequest{Changes: changes}
	if _, err := encodeFrame(1, protocol.RequestHostHeartBeat, false, over, DefaultMaxFrameSize); !errors.Is(err, errOutOfRange) {
		t.Fatalf("encoding %d changes: %v", len(changes), err)
	}
	body := append(envelopeHead(1, protocol.RequestHostHeartBeat, false), handHostHeartBeat(protocol.Header{}, 1, 1, changes)...)
	var fd frameDecoder
	var r request
	if err := fd.decodeRequest(body, &r); badFrameReason(err) != ReasonOutOfRange {
		t.Fatalf("decoding %d changes: %v", len(changes), err)
	}
	body = append(envelopeHead(1, protocol.RequestHostHeartBeat, false), handHostHeartBeat(protocol.Header{}, 1, 1, changes[:protocol.MaxHostChanges])...)
	if err := fd.decodeRequest(body, &r); err != nil || len(r.host.Changes) != protocol.MaxHostChanges {
		t.Fatalf("decoding %d changes: %d, %v", protocol.MaxHostChanges, len(r.host.Changes), err)
	}
	// A change of the wrong type is malformed.
	bad := appendMapLen(nil, 1)
	bad = appendStr(bad, "changes")
	bad = appendArrayLen(bad, 1)
	bad = appendStr(bad, "not a map")
	if err := fd.decodeRequest(append(envelopeHead(1, protocol.RequestHostHeartBeat, false), bad...), &r); badFrameReason(err) != ReasonMalformed {
		t.Fatalf("a change that is a string: %v", err)
	}
}

// TestHostHeartBeatServed: on a Mux server a host heartbeat goes to the host handler; on a
// server without one it is answered UNSUPPORTED, the connection kept.
func TestHostHeartBeatServed(t *testing.T) {
	mux, _ := linkMux(t)
	mux.SetHostHandler(func(req *protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse {
		return &protocol.HostHeartBeatResponse{Header: protocol.Header{Code: protocol.CodeSuccess}, Incarnation: 9, Seq: req.Seq,
			Changes: []protocol.HostChange{{Group: "g1", Member: "a", Epoch: uint64(len(req.Changes))}}}
	})
	keys := newKeys(t)
	s := startServer(t, mux, func(o *ServerOptions) { o.Auth = Auth{Keys: keys} })
	cl := newClient(t, map[string]string{linkHostB: s.Addr()}, func(o *ClientOptions) {
		o.Auth = Auth{Keys: keys, Host: linkHostA}
	})
	send := func(cl *Client, to string) (*protocol.HostHeartBeatResponse, error) {
		return callSync(t, func(done func(*protocol.HostHeartBeatResponse, error)) {
			cl.Caller(Timeouts{Call: time.Second}).SendHostHeartBeat(to, &protocol.HostHeartBeatRequest{
				Header: protocol.Header{LocalID: linkHostA, RemoteID: to}, Incarnation: 1, Seq: 3,
				Changes: []protocol.HostChange{{Group: "g1", Member: "n1", Epoch: 1}}}, done)
		})
	}
	resp, err := send(cl, linkHostB)
	if err != nil || resp.Code != protocol.CodeSuccess || resp.Seq != 3 || resp.Incarnation != 9 || len(resp.Changes) != 1 || resp.Changes[0].Epoch != 1 {
		t.Fatalf("%+v %v", resp, err)
	}
	plain := startServer(t, &fakeHandler{}, nil)
	cl2 := newClient(t, map[string]string{"n1": plain.Addr()}, nil)
	if resp, err := send(cl2, "n1"); err != nil || resp.Code != protocol.CodeUnsupported {
		t.Fatalf("no host handler: %+v %v", resp, err)
	}
	if resp, err := heartBeat(t, cl2, "n1", 1); err != nil || resp.Code != protocol.CodeSuccess {
		t.Fatalf("connection not kept: %+v %v", resp, err)
	}
}

// TestHostHeartBeatNotBehindGroupRequests: a host heartbeat has a worker of its own, so it
// is answered while every worker is busy with the groups' requests (here: one worker held by a
// vote that waits, as a vote waits for its fsync in a mass election). Behind them, a host's
// liveness frames came late and the host flapped stale and fresh through a cold start.
func TestHostHeartBeatNotBehindGroupRequests(t *testing.T) {
	mux, hs := linkMux(t)
	h := hs[[2]string{"g1", "a"}]
	h.gate, h.gateOnly = make(chan struct{}), protocol.RequestVote
	mux.SetHostHandler(func(req *protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse {
		return &protocol.HostHeartBeatResponse{Header: protocol.Header{Code: protocol.CodeSuccess}, Incarnation: 9, Seq: req.Seq}
	})
	s := startServer(t, mux, func(o *ServerOptions) { o.Workers = 1; o.Auth = Auth{Insecure: true} })
	cl := newClient(t, map[string]string{linkHostB: s.Addr()}, func(o *ClientOptions) { o.Auth = Auth{Insecure: true, Host: linkHostA} })
	voted := make(chan error, 2)
	for range 2 { // one holds the only worker, one waits in the queue
		cl.Caller(Timeouts{Call: 10 * time.Second}).SendVote(linkHostB, &protocol.VoteRequest{Header: protocol.Header{
			Group: "g1", RemoteID: "a", LocalID: "n1", LeaderID: "n1", Term: 1}}, func(_ *protocol.VoteResponse, err error) { voted <- err })
	}
	for h.active.Load() == 0 {
		time.Sleep(time.Millisecond) // the first vote is on the worker (polled: no event to wait for)
	}
	resp, err := callSync(t, func(done func(*protocol.HostHeartBeatResponse, error)) {
		cl.Caller(Timeouts{Call: 5 * time.Second}).SendHostHeartBeat(linkHostB, &protocol.HostHeartBeatRequest{
			Header: protocol.Header{LocalID: linkHostA, RemoteID: linkHostB}, Incarnation: 1, Seq: 3}, done)
	})
	if err != nil || resp.Code != protocol.CodeSuccess || resp.Seq != 3 {
		t.Fatalf("host heartbeat while the worker is busy: %+v %v", resp, err)
	}
	if n := h.handled.Load(); n != 0 {
		t.Fatalf("%d votes handled before the host heartbeat's answer: the worker was not held", n)
	}
	close(h.gate)
	for range 2 {
		if err := <-voted; err != nil {
			t.Fatal(err)
		}
	}
}
