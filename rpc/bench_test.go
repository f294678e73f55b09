package rpc

import (
	"testing"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// BenchmarkEncodeDecodeHeartBeat encodes and decodes a heartbeat request and its response,
// as one round trip does on both sides, minus the network. Target: 0 allocs/op.
func BenchmarkEncodeDecodeHeartBeat(b *testing.B) {
	req := hbRequest(42)
	rsp := &protocol.HeartBeatResponse{Header: protocol.Header{Group: testGroup, RemoteID: "n1",
		LocalID: testSelf, LeaderID: "n1", Term: 42, Code: protocol.CodeSuccess}, LedgerEndTerm: 41, LedgerEndIndex: 420}
	buf := make([]byte, 0, 256)
	var c cursor
	var r request
	var s response
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = beginFrame(buf[:0], uint64(i), protocol.RequestHeartBeat, false)
		buf = appendHeartBeatRequest(buf, req)
		buf, _ = finishFrame(buf, 0, DefaultMaxFrameSize)
		if err := c.decodeRequest(buf[frameHeaderLen:], &r); err != nil {
			b.Fatal(err)
		}
		buf = beginFrame(buf[:0], uint64(i), protocol.RequestHeartBeat, true)
		buf = appendHeartBeatResponse(buf, rsp)
		buf, _ = finishFrame(buf, 0, DefaultMaxFrameSize)
		if err := c.decodeResponse(buf[frameHeaderLen:], &s); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
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
	h := &fixedHandler{hb: protocol.HeartBeatResponse{Header: protocol.Header{Group: testGroup,
		RemoteID: "n1", LocalID: testSelf, LeaderID: "n1", Term: 42, Code: protocol.CodeSuccess}}}
	s := startServer(b, h, func(o *ServerOptions) { o.Logger = zap.NewNop() })
	cl := newClient(b, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) { o.Logger = zap.NewNop() })
	req := hbRequest(42)
	got := make(chan error, 1)
	done := func(_ *protocol.HeartBeatResponse, err error) { got <- err }
	b.ReportAllocs()
	for b.Loop() {
		cl.SendHeartBeat("srv", req, done)
		if err := <-got; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
}
