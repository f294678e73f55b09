package rpc

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// frameWith wraps a body in a correct length header.
func frameWith(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestHostileInput sends each hostile byte sequence on its own raw connection to a live
// server and checks that the server closes that connection (and counts the reason), keeps
// answering a well-behaved client on another connection, and does not allocate in
// proportion to what the bytes claim.
func TestHostileInput(t *testing.T) {
	const frameTimeout = 200 * time.Millisecond
	var reasons reasonCounter
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) {
		o.OnBadFrame = reasons.add
		o.frameTimeout = frameTimeout
	})
	good := newClient(t, map[string]string{"srv": s.Addr()}, nil)
	// The server's sampled logger is built by its first warning (observe.go: zap's sampler,
	// 448 KiB, once per server), which is not what a hostile frame costs: build it now.
	s.obs.logAt(zap.WarnLevel)

	garbage := make([]byte, 48)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}

	otherGroup := hbRequest(1)
	otherGroup.Group = "another-group"
	otherMember := hbRequest(2)
	otherMember.RemoteID = "n9"

	cases := []struct {
		name      string
		send      []byte
		closeSend bool   // half-close after sending, as a peer that gives up would
		reason    string // "" = the connection stays open and gets an answer
		wantCode  protocol.ResponseCode
	}{
		{name: "length above max frame size", send: []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, reason: ReasonOversize},
		{name: "length just above max", send: binary.BigEndian.AppendUint32(nil, DefaultMaxFrameSize+1), reason: ReasonOversize},
		{name: "zero length", send: []byte{0, 0, 0, 0}, reason: ReasonOversize},
		{name: "length lies, then close", send: append([]byte{0, 0, 0x03, 0xe8}, bytes.Repeat([]byte{0x90}, 10)...),
			closeSend: true, reason: ReasonTruncated},
		// A peer that sends part of a frame and then nothing, keeping the socket open, would
		// otherwise hold one of MaxConns forever.
		{name: "length lies, connection held open", send: append([]byte{0, 0, 0x03, 0xe8}, bytes.Repeat([]byte{0x90}, 10)...),
			reason: ReasonStalled},
		{name: "half a header, connection held open", send: []byte{0, 0}, reason: ReasonStalled},
		{name: "truncated header, then close", send: []byte{0, 0}, closeSend: true, reason: ReasonTruncated},
		{name: "truncated valid frame, then close", send: frameOf(hbReqCase, 1, hbRequest(1))[:20],
			closeSend: true, reason: ReasonTruncated},
		{name: "random garbage body", send: frameWith(garbage), reason: ReasonMalformed},
		{name: "array32 header claiming 2^31 elements", send: frameWith([]byte{0xdd, 0x7f, 0xff, 0xff, 0xff}), reason: ReasonMalformed},
		{name: "map32 header claiming 2^32-1 pairs", send: frameWith([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}), reason: ReasonMalformed},
		{name: "str32 header claiming 2 GiB", send: frameWith(append(envelopeHead(1, protocol.RequestHeartBeat, false),
			0x81, 0xdb, 0x7f, 0xff, 0xff, 0xff)), reason: ReasonMalformed},
		{name: "bin32 header claiming 4 GiB", send: frameWith(append(envelopeHead(1, protocol.RequestHeartBeat, false),
			0x81, 0xa5, 'g', 'r', 'o', 'u', 'p', 0xc6, 0xff, 0xff, 0xff, 0xff)), reason: ReasonMalformed},
		{name: "deeply nested arrays", send: frameWith(append(bytes.Repeat([]byte{0x91}, 1000), 0xc0)), reason: ReasonTooDeep},
		{name: "unknown request code", send: frameWith(append(envelopeHead(1, 42, false), 0x80)), reason: ReasonUnknownCode},
		{name: "response sent to the server", send: frameOf(hbRespCase, 1, &protocol.HeartBeatResponse{}), reason: ReasonUnexpectedKind},
		{name: "valid frame for another group", send: frameOf(hbReqCase, 1, otherGroup), wantCode: protocol.CodeUnknownGroup},
		{name: "valid frame for another member", send: frameOf(hbReqCase, 2, otherMember), wantCode: protocol.CodeUnknownMember},
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Whatever the process allocates during the case, the server's decoding of the
			// hostile bytes included: the msgpack library alone would allocate 1 MiB or more
			// for each lying string header.
			defer checkAllocated(t, hostileCaseAllocLimit)()
			conn, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := reasons.get(tc.reason)
			sent := time.Now()
			if _, err := conn.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.closeSend {
				_ = conn.(*net.TCPConn).CloseWrite()
			}
			_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))

			if tc.reason == "" {
				body, err := readFrame(conn)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				var c frameDecoder
				var resp response
				if err := c.decodeResponse(body, &resp); err != nil || resp.hb.Code != tc.wantCode {
					t.Fatalf("answer %+v, %v; want code %v", resp.hb, err, tc.wantCode)
				}
				// Still open: a second request on the same connection is answered too.
				if _, err := conn.Write(frameOf(hbReqCase, 3, hbRequest(3))); err != nil {
					t.Fatal(err)
				}
				if _, err := readFrame(conn); err != nil {
					t.Fatalf("connection unusable after a foreign request: %v", err)
				}
				return
			}

			n, err := conn.Read(make([]byte, 64))
			if err == nil || isTimeout(err) {
				t.Fatalf("connection not closed: read %d bytes, %v", n, err)
			}
			if waited := time.Since(sent); tc.reason == ReasonStalled && waited < frameTimeout {
				t.Fatalf("closed after %v, before its frame timeout of %v", waited, frameTimeout)
			}
			eventually(t, "the bad frame to be counted as "+tc.reason, func() bool {
				return reasons.get(tc.reason) == before+1
			})
			// The server keeps serving everyone else.
			if resp, err := heartBeat(t, good, "srv", int64(100+i)); err != nil || resp.Term != int64(100+i) {
				t.Fatalf("server stopped answering after %s: %+v, %v", tc.name, resp, err)
			}
		})
	}
	if !good.Connected("srv") {
		t.Fatal("the well-behaved client lost its connection")
	}
}

// TestFloodWhileThrottledClosesConnection: a peer that keeps sending while its requests are
// stuck at the in-flight limit is disconnected once its unread backlog passes the bound,
// instead of growing the server's buffer without limit.
func TestFloodWhileThrottledClosesConnection(t *testing.T) {
	h := &fakeHandler{gate: make(chan struct{})}
	var reasons reasonCounter
	s := startServer(t, h, func(o *ServerOptions) {
		o.MaxInflightPerConn = 2
		o.MaxFrameSize = 1024 // the backlog bound is 4 frames' worth
		o.OnBadFrame = reasons.add
	})
	t.Cleanup(func() { close(h.gate) }) // before the server stops

	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frame := frameOf(hbReqCase, 1, hbRequest(1))
	flood := bytes.Repeat(frame, (64<<10)/len(frame)) // 64 KiB of valid requests
	writeDone := make(chan struct{})
	go func() {
		defer close(writeDone)
		_ = conn.SetWriteDeadline(time.Now().Add(waitTimeout))
		_, _ = conn.Write(flood) // fails once the server hangs up; that is the point
	}()
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("flooding connection not closed: %v", err)
	}
	<-writeDone
	eventually(t, "the flood to be counted", func() bool { return reasons.get(ReasonFlood) == 1 })
	if m := h.maxActive.Load(); m > 2 {
		t.Fatalf("%d requests of one connection in handlers, limit 2", m)
	}
}

// TestClientRejectsHostileResponses: responses are untrusted too. A fake peer answers with a
// hostile frame; the client closes that connection, fails the call, counts the frame, and
// reconnects.
func TestClientRejectsHostileResponses(t *testing.T) {
	replies := []struct {
		name   string
		reply  func(id uint64) []byte
		reason string
	}{
		{"array32 claiming 2^31 elements", func(uint64) []byte { return frameWith([]byte{0xdd, 0x7f, 0xff, 0xff, 0xff}) }, ReasonMalformed},
		{"oversize length", func(uint64) []byte { return []byte{0x7f, 0, 0, 0} }, ReasonOversize},
		{"request instead of response", func(id uint64) []byte { return frameOf(hbReqCase, id, hbRequest(1)) }, ReasonUnexpectedKind},
		{"answer with another code", func(id uint64) []byte {
			return frameOf(voteRespCase, id, &protocol.VoteResponse{})
		}, ReasonUnexpectedKind},
		{"truncated, then close", func(id uint64) []byte {
			return frameOf(hbRespCase, id, &protocol.HeartBeatResponse{})[:10]
		}, ReasonTruncated},
		// Ids count up from 1; an answer to one never sent can not be matched to anything.
		{"answer to an id never sent", func(id uint64) []byte {
			return frameOf(hbRespCase, id+1, &protocol.HeartBeatResponse{})
		}, ReasonUnknownID},
		{"answer to id 0", func(uint64) []byte { return frameOf(hbRespCase, 0, &protocol.HeartBeatResponse{}) }, ReasonUnknownID},
	}
	for _, tc := range replies {
		t.Run(tc.name, func(t *testing.T) {
			addr, served := answerOnce(t, tc.reply, true)
			var reasons reasonCounter
			cl := newClient(t, map[string]string{"p": addr}, func(o *ClientOptions) {
				o.CallTimeout = time.Hour // only the bad frame can end the call
				o.OnBadFrame = reasons.add
			})
			if _, err := heartBeat(t, cl, "p", 1); err == nil {
				t.Fatal("call succeeded on a hostile answer")
			}
			<-served
			eventually(t, "the bad frame to be counted as "+tc.reason, func() bool { return reasons.get(tc.reason) == 1 })
		})
	}
}

// TestFrameTimeout: the frame timeout applies to unfinished frames only, and runs from a
// frame's first bytes. A connection that completes a frame sent in two pieces and then sits
// idle for several timeouts stays open and is answered; one that trickles a frame a byte
// at a time, each byte well within the timeout, is closed and counted all the same.
func TestFrameTimeout(t *testing.T) {
	const frameTimeout = 300 * time.Millisecond
	var reasons reasonCounter
	s := startServer(t, &fakeHandler{}, func(o *ServerOptions) {
		o.frameTimeout = frameTimeout
		o.OnBadFrame = reasons.add
	})
	dial := func(t *testing.T) net.Conn { return dialRaw(t, s.Addr()) }

	t.Run("idle between frames", func(t *testing.T) {
		conn := dial(t)
		frame := frameOf(hbReqCase, 1, hbRequest(1))
		if _, err := conn.Write(frame[:7]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let the server see a partial frame
		if _, err := conn.Write(frame[7:]); err != nil {
			t.Fatal(err)
		}
		if _, err := readFrame(conn); err != nil {
			t.Fatalf("no answer: %v", err)
		}
		time.Sleep(3 * frameTimeout)
		if _, err := conn.Write(frameOf(hbReqCase, 2, hbRequest(2))); err != nil {
			t.Fatal(err)
		}
		if _, err := readFrame(conn); err != nil {
			t.Fatalf("an idle connection was not answered: %v", err)
		}
	})

	t.Run("trickled frame", func(t *testing.T) {
		conn := dial(t)
		before := reasons.get(ReasonStalled)
		if _, err := conn.Write([]byte{0, 0, 0x03, 0xe8}); err != nil { // a 1000-byte frame
			t.Fatal(err)
		}
		// One byte per quarter timeout, until the server hangs up (a read that fails other
		// than by its deadline) or the test gives up.
		for start := time.Now(); ; {
			if time.Since(start) > waitTimeout {
				t.Fatal("trickling connection not closed")
			}
			if _, err := conn.Write([]byte{'x'}); err != nil {
				break
			}
			_ = conn.SetReadDeadline(time.Now().Add(frameTimeout / 4))
			if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
				break
			}
		}
		eventually(t, "the stalled frame to be counted", func() bool { return reasons.get(ReasonStalled) == before+1 })
	})
}
