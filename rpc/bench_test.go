package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// benchGroup is a realistic group name for the benchmarks. The tests' one-letter "g" would
// flatter them: Go makes one-byte strings without allocating, longer ones are copied.
const benchGroup = "broker-a"

// benchHeartBeat returns a heartbeat from leader n0 to n1 and n1's answer, with realistic
// names.
func benchHeartBeat() (*protocol.HeartBeatRequest, *protocol.HeartBeatResponse) {
	req := &protocol.HeartBeatRequest{Header: protocol.Header{Group: benchGroup, RemoteID: "n1",
		LocalID: "n0", LeaderID: "n0", Term: 42}}
	rsp := &protocol.HeartBeatResponse{Header: protocol.Header{Group: benchGroup, RemoteID: "n0",
		LocalID: "n1", LeaderID: "n0", Term: 42, Code: protocol.CodeSuccess}, LedgerEndTerm: 41, LedgerEndIndex: 420}
	return req, rsp
}

// BenchmarkEncodeDecodeHeartBeat encodes and decodes a heartbeat request and its response,
// as one round trip does on both sides, minus the network. Encoding allocates nothing; the
// decoder allocates only the strings it copies out of the frames.
func BenchmarkEncodeDecodeHeartBeat(b *testing.B) {
	req, rsp := benchHeartBeat()
	var c frameDecoder
	var r request
	var s response
	var n int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		fb, err := encodeFrame(uint64(i), protocol.RequestHeartBeat, false, req, DefaultMaxFrameSize)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.decodeRequest(fb.b[frameHeaderLen:], &r); err != nil {
			b.Fatal(err)
		}
		putFrameBuf(fb)
		if fb, err = encodeFrame(uint64(i), protocol.RequestHeartBeat, true, rsp, DefaultMaxFrameSize); err != nil {
			b.Fatal(err)
		}
		if err := c.decodeResponse(fb.b[frameHeaderLen:], &s); err != nil {
			b.Fatal(err)
		}
		n = len(fb.b)
		putFrameBuf(fb)
	}
	b.SetBytes(int64(n))
}

// fixedHandler answers heartbeats with one preallocated response, so the benchmark measures
// the transport, not the handler.
type fixedHandler struct {
	fakeHandler
	hb protocol.HeartBeatResponse
}

func (h *fixedHandler) HandleHeartBeat(*protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	return &h.hb
}

// BenchmarkHeartBeatRoundTrip measures sequential heartbeat round trips over loopback: client
// encode, write, server decode, worker, handler, AsyncWrite, client decode, done. The
// sub-benchmarks run it without peer authentication (auth=off) and with it (auth=on, the group
// key, and auth=member, member keys: the client seals in its writer and opens in its reader,
// the server opens on the event loop and seals on the worker), on the same kind of
// connection, so their ratio is the cost of authentication; the handshake happens once,
// before the timer starts.
func BenchmarkHeartBeatRoundTrip(b *testing.B) {
	keys := newKeys(b)
	mk := newMemberKeys(b, "n0", "n1") // auth=member: member keys (handshake version 3), same sealing
	for _, c := range []struct {
		name   string
		server Auth
		client Auth
	}{
		{"auth=off", Auth{Insecure: true}, Auth{Insecure: true}},
		{"auth=on", Auth{Keys: keys, Group: benchGroup, SelfID: "n1", Members: []string{"n0"}},
			Auth{Keys: keys, Group: benchGroup, SelfID: "n0"}},
		{"auth=member", Auth{PeerKeys: mk.peerKeys("n1"), Group: benchGroup, SelfID: "n1", Members: []string{"n0"}},
			Auth{PeerKeys: mk.peerKeys("n0"), Group: benchGroup, SelfID: "n0"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			req, rsp := benchHeartBeat()
			h := &fixedHandler{hb: *rsp}
			s := startServer(b, h, func(o *ServerOptions) { o.Logger, o.Auth = zap.NewNop(), c.server })
			cl := newClient(b, map[string]string{"n1": s.Addr()}, func(o *ClientOptions) { o.Logger, o.Auth = zap.NewNop(), c.client })
			got := make(chan error, 1)
			done := func(_ *protocol.HeartBeatResponse, err error) { got <- err }
			b.ReportAllocs()
			for b.Loop() {
				cl.SendHeartBeat("n1", req, done)
				if err := <-got; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
			if st := s.Stats(); st.AuthFailures != 0 || st.BadFrames != 0 {
				b.Fatalf("server stats %+v", st)
			}
		})
	}
}

// BenchmarkSealOpenHeartBeat is the cryptography of one round trip alone: seal and open a
// heartbeat request and its answer (two of each), as sealFrame and the readers do.
func BenchmarkSealOpenHeartBeat(b *testing.B) {
	keys := newKeys(b)
	in, msg1, err := secure.NewInitiator(keys, benchGroup, "n0", "n1")
	if err != nil {
		b.Fatal(err)
	}
	msg2, srv, _, err := secure.Respond(keys, benchGroup, "n1", msg1, func(string) bool { return true })
	if err != nil {
		b.Fatal(err)
	}
	cli, err := in.Finish(msg2)
	if err != nil {
		b.Fatal(err)
	}
	req, rsp := benchHeartBeat()
	reqFrame, _ := encodeFrame(1, protocol.RequestHeartBeat, false, req, DefaultMaxFrameSize)
	rspFrame, _ := encodeFrame(1, protocol.RequestHeartBeat, true, rsp, DefaultMaxFrameSize)
	plainReq := bytes.Clone(reqFrame.b[frameHeaderLen:])
	plainRsp := bytes.Clone(rspFrame.b[frameHeaderLen:])
	fb := newFrameBuf()
	var opened []byte
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range []struct {
			plain      []byte
			seal, open *secure.Session
		}{{plainReq, cli, srv}, {plainRsp, srv, cli}} {
			fb.b = append(append(fb.b[:0], 0, 0, 0, 0), p.plain...)
			if err := sealFrame(p.seal, fb); err != nil {
				b.Fatal(err)
			}
			if opened, err = p.open.Open(opened[:0], fb.b[frameHeaderLen:]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSendWhileManyPending is the cost of a call to a peer on a link that already has
// thousands of calls pending, as a host link has in a mass election (issue 29: the vote
// requests of thousands of groups to one peer host). The fake peer never answers the first
// `pending` calls and answers every later one at once; each iteration sends 64 calls, yielding
// after each (one small write batch per call, as when many members send), and waits for their
// answers. Arming the timeout sweep after each write used to scan every pending call under the
// peer's lock, which every call to that peer takes, so this cost grew with the pending count;
// submit now arms it in O(1).
func BenchmarkSendWhileManyPending(b *testing.B) {
	for _, pending := range []int{16, 16384} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			_, rsp := benchHeartBeat()
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				w := bufio.NewWriter(conn)
				for {
					req, ok := readRequest(conn)
					if !ok {
						return
					}
					if req.id <= uint64(pending) {
						continue
					}
					fb, err := encodeFrame(req.id, protocol.RequestHeartBeat, true, rsp, DefaultMaxFrameSize)
					if err != nil {
						return
					}
					_, _ = w.Write(fb.b)
					putFrameBuf(fb)
					if err := w.Flush(); err != nil {
						return
					}
				}
			}()
			cl := newClient(b, map[string]string{"n1": ln.Addr().String()}, func(o *ClientOptions) {
				o.Logger, o.CallTimeout, o.SendQueue = zap.NewNop(), time.Hour, 1<<15
			})
			req, _ := benchHeartBeat()
			answered := make(chan error, 64)
			done := func(_ *protocol.HeartBeatResponse, err error) {
				if !errors.Is(err, ErrClosed) {
					answered <- err
				}
			}
			for range pending {
				cl.SendHeartBeat("n1", req, done)
			}
			b.ReportAllocs()
			for b.Loop() {
				for range 64 {
					cl.SendHeartBeat("n1", req, done)
					runtime.Gosched()
				}
				for range 64 {
					if err := <-answered; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "ns/call")
		})
	}
}
