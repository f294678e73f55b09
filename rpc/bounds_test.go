package rpc

import (
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// boundField is one int64 field of a message: a term or a ledger value.
type boundField struct {
	name   string // Go field name, "Term" for the Header's
	lo, hi int64  // the range the wire accepts
}

// boundFields lists every int64 field of the message type mc describes, found by reflection,
// so a field added later is tested (and fails the test if codec.go does not bound it).
func boundFields(mc msgCase) []boundField {
	var out []boundField
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			switch {
			case f.Anonymous:
				walk(f.Type)
			case f.Type.Kind() == reflect.Int64:
				lo, hi := fieldBounds(f.Name)
				out = append(out, boundField{f.Name, lo, hi})
			}
		}
	}
	walk(reflect.TypeOf(mc.newMsg()).Elem())
	return out
}

// withField returns a new message of mc's type, valid in every other respect, with the named
// int64 field set to v.
func withField(mc msgCase, name string, v int64) any {
	m := mc.newMsg()
	hdr := reflect.ValueOf(m).Elem().FieldByName("Header")
	hdr.Set(reflect.ValueOf(protocol.Header{Group: testGroup, RemoteID: testSelf, LocalID: "n1", LeaderID: "n1", Term: 1}))
	reflect.ValueOf(m).Elem().FieldByName(name).SetInt(v)
	return m
}

// boundaryValues are the values tried for a field with range [lo, hi], and whether the wire
// accepts them.
func boundaryValues(lo, hi int64) []struct {
	v  int64
	ok bool
} {
	return []struct {
		v  int64
		ok bool
	}{{lo, true}, {hi, true}, {lo - 1, false}, {hi + 1, false}, {math.MinInt64, false}, {math.MaxInt64, false}}
}

// TestWireBoundsEveryField: for every int64 field of every message, a term is accepted in
// [0, MaxTerm] and a ledger end term or index in [-1, MaxLedgerValue]; one past either end
// is refused by the decoder with errOutOfRange (a bad frame) and by the encoder (the call
// fails here rather than the connection there).
func TestWireBoundsEveryField(t *testing.T) {
	for _, mc := range msgCases {
		fields := boundFields(mc)
		if len(fields) == 0 {
			t.Fatalf("%s: no int64 fields found; every message carries a term", mc.name)
		}
		for _, f := range fields {
			for _, bv := range boundaryValues(f.lo, f.hi) {
				m := withField(mc, f.name, bv.v)
				body := append(envelopeHead(1, mc.code, mc.resp), handMessage(m)...)
				_, got, err := decodeBody(mc, body)
				switch {
				case bv.ok && err != nil:
					t.Errorf("%s.%s = %d refused: %v", mc.name, f.name, bv.v, err)
				case bv.ok && !reflect.DeepEqual(got, m):
					t.Errorf("%s.%s = %d decoded as %+v", mc.name, f.name, bv.v, got)
				case !bv.ok && !errors.Is(err, errOutOfRange):
					t.Errorf("%s.%s = %d: got %v, want errOutOfRange", mc.name, f.name, bv.v, err)
				case !bv.ok && badFrameReason(err) != ReasonOutOfRange:
					t.Errorf("%s.%s = %d: reason %q", mc.name, f.name, bv.v, badFrameReason(err))
				}
				fb, err := mc.encode(1, m, DefaultMaxFrameSize)
				if fb != nil {
					putFrameBuf(fb)
				}
				if bv.ok != (err == nil) || (!bv.ok && !errors.Is(err, errOutOfRange)) {
					t.Errorf("encode %s.%s = %d: %v", mc.name, f.name, bv.v, err)
				}
			}
		}
	}
}

// boundsHandler counts the requests that reach it and answers each with a minimal valid
// response.
type boundsHandler struct{ handled atomic.Int32 }

func (h *boundsHandler) HandleVote(*protocol.VoteRequest) *protocol.VoteResponse {
	h.handled.Add(1)
	return &protocol.VoteResponse{}
}

func (h *boundsHandler) HandleHeartBeat(*protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
	h.handled.Add(1)
	return &protocol.HeartBeatResponse{}
}

func (h *boundsHandler) HandleLeadershipTransfer(_ *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
	h.handled.Add(1)
	reply(&protocol.LeadershipTransferResponse{})
}

func (h *boundsHandler) HandleMetadata(*protocol.MetadataRequest) *protocol.MetadataResponse {
	h.handled.Add(1)
	return &protocol.MetadataResponse{}
}

// TestServerRefusesOutOfRangeRequests: on a live server, a request with any term or ledger
// value one past its bound closes the connection, is counted as out_of_range and never
// reaches the handler; the bound itself is answered.
func TestServerRefusesOutOfRangeRequests(t *testing.T) {
	h := &boundsHandler{}
	var reasons reasonCounter
	s := startServer(t, h, func(o *ServerOptions) { o.OnBadFrame = reasons.add })
	for _, mc := range msgCases {
		if mc.resp {
			continue
		}
		for _, f := range boundFields(mc) {
			for _, bv := range boundaryValues(f.lo, f.hi)[:4] {
				t.Run(fmt.Sprintf("%s.%s=%d", mc.name, f.name, bv.v), func(t *testing.T) {
					conn, err := net.Dial("tcp", s.Addr())
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					_ = conn.SetDeadline(time.Now().Add(waitTimeout))
					handled, counted := h.handled.Load(), reasons.get(ReasonOutOfRange)
					m := withField(mc, f.name, bv.v)
					if _, err := conn.Write(frameWith(append(envelopeHead(7, mc.code, false), handMessage(m)...))); err != nil {
						t.Fatal(err)
					}
					body, err := readFrame(conn)
					if bv.ok {
						if err != nil {
							t.Fatalf("no answer to a request at the bound: %v", err)
						}
						if got := h.handled.Load(); got != handled+1 {
							t.Fatalf("handler ran %d times", got-handled)
						}
						_ = body
						return
					}
					if err == nil || isTimeout(err) {
						t.Fatalf("connection not closed: %v", err)
					}
					eventually(t, "the frame to be counted as out_of_range", func() bool {
						return reasons.get(ReasonOutOfRange) == counted+1
					})
					if got := h.handled.Load(); got != handled {
						t.Fatalf("an out-of-range request reached the handler")
					}
				})
			}
		}
	}
}

// TestClientRefusesOutOfRangeResponses: a peer answering with any term or ledger value one
// past its bound is a bad frame for the client too: the call fails, the connection is
// closed and the frame counted. An answer at the bound is delivered unchanged.
func TestClientRefusesOutOfRangeResponses(t *testing.T) {
	for _, mc := range msgCases {
		if !mc.resp {
			continue
		}
		for _, f := range boundFields(mc) {
			for _, bv := range boundaryValues(f.lo, f.hi)[:4] {
				t.Run(fmt.Sprintf("%s.%s=%d", mc.name, f.name, bv.v), func(t *testing.T) {
					answer := withField(mc, f.name, bv.v)
					addr, served := answerOnce(t, func(id uint64) []byte {
						return frameWith(append(envelopeHead(id, mc.code, true), handMessage(answer)...))
					}, false)
					var reasons reasonCounter
					cl := newClient(t, map[string]string{"p": addr}, func(o *ClientOptions) {
						o.CallTimeout = time.Hour // only the answer can end the call
						o.OnBadFrame = reasons.add
					})
					got, err := sendAny(t, cl, mc.code)
					if bv.ok {
						if err != nil || !reflect.DeepEqual(got, answer) {
							t.Fatalf("answer at the bound: got %+v, %v; want %+v", got, err, answer)
						}
						_ = cl.Close()
						<-served
						return
					}
					if err == nil {
						t.Fatalf("call succeeded on an out-of-range answer %+v", got)
					}
					<-served // the fake peer saw the client hang up
					eventually(t, "the frame to be counted as out_of_range", func() bool {
						return reasons.get(ReasonOutOfRange) == 1
					})
				})
			}
		}
	}
}

// sendAny makes one call of the given code with a minimal valid request and returns the
// response as a pointer to the protocol struct.
func sendAny(t *testing.T, cl *Client, code protocol.RequestCode) (any, error) {
	t.Helper()
	hdr := protocol.Header{Group: testGroup, RemoteID: testSelf, LocalID: "n1", LeaderID: "n1", Term: 1}
	switch code {
	case protocol.RequestVote:
		return callSync(t, func(done func(*protocol.VoteResponse, error)) {
			cl.SendVote("p", &protocol.VoteRequest{Header: hdr}, done)
		})
	case protocol.RequestHeartBeat:
		return callSync(t, func(done func(*protocol.HeartBeatResponse, error)) {
			cl.SendHeartBeat("p", &protocol.HeartBeatRequest{Header: hdr}, done)
		})
	case protocol.RequestLeadershipTransfer:
		return callSync(t, func(done func(*protocol.LeadershipTransferResponse, error)) {
			cl.SendLeadershipTransfer("p", &protocol.LeadershipTransferRequest{Header: hdr}, done)
		})
	case protocol.RequestMetadata:
		return callSync(t, func(done func(*protocol.MetadataResponse, error)) {
			cl.SendMetadata("p", &protocol.MetadataRequest{Header: hdr}, done)
		})
	}
	t.Fatalf("no request code %v", code)
	return nil, nil
}

// TestClientRefusesToSendOutOfRange: a request the peer would refuse fails here, with
// ErrOutOfRange, and the connection (with every other call on it) is untouched.
func TestClientRefusesToSendOutOfRange(t *testing.T) {
	s := startServer(t, &fakeHandler{}, nil)
	var reasons []string
	cl := newClient(t, map[string]string{"srv": s.Addr()}, func(o *ClientOptions) {
		o.OnRPCError = func(_, reason string) { reasons = append(reasons, reason) }
	})
	if _, err := heartBeat(t, cl, "srv", protocol.MaxTerm+1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("term MaxTerm+1 sent: %v", err)
	}
	if len(reasons) != 1 || reasons[0] != ReasonOutOfRange {
		t.Fatalf("reasons %v", reasons)
	}
	if _, err := heartBeat(t, cl, "srv", 5); err != nil || !cl.Connected("srv") {
		t.Fatalf("connection harmed: %v", err)
	}
}

// TestForeignGroupLearnsNothing: a request for another group is answered with the code
// UNKNOWN_GROUP alone, for every request type, although the handler (as the elector does)
// fills in its ids, term, role and peers: nothing about the group leaves the member.
func TestForeignGroupLearnsNothing(t *testing.T) {
	s := startServer(t, &fakeHandler{}, nil)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	for i, mc := range msgCases {
		if mc.resp {
			continue
		}
		m := withField(mc, "Term", 3)
		reflect.ValueOf(m).Elem().FieldByName("Header").FieldByName("Group").SetString("another-group")
		if _, err := conn.Write(frameWith(append(envelopeHead(uint64(i+1), mc.code, false), handMessage(m)...))); err != nil {
			t.Fatal(err)
		}
		body, err := readFrame(conn)
		if err != nil {
			t.Fatalf("%s: no answer: %v", mc.name, err)
		}
		rc := caseFor(mc.code, true)
		_, got, err := decodeBody(rc, body)
		if err != nil {
			t.Fatal(err)
		}
		want := rc.newMsg()
		reflect.ValueOf(want).Elem().FieldByName("Header").Set(reflect.ValueOf(protocol.Header{Code: protocol.CodeUnknownGroup}))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s for another group answered %+v, want the code alone", mc.name, got)
		}
	}
}
