package rpc

import (
	"testing"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
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
// encode, write, server decode, worker, handler, AsyncWrite, client decode, done.
func BenchmarkHeartBeatRoundTrip(b *testing.B) {
	req, rsp := benchHeartBeat()
	h := &fixedHandler{hb: *rsp}
	s := startServer(b, h, func(o *ServerOptions) { o.Logger = zap.NewNop() })
	cl := newClient(b, map[string]string{"n1": s.Addr()}, func(o *ClientOptions) { o.Logger = zap.NewNop() })
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
}
