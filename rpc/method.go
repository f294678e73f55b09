package rpc

import (
	"sync/atomic"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// The per-request plumbing lives in one table, one entry per request code: where the decoder
// puts its request and response, how the server hands the request to the Handler and sends the
// answer, and how the client completes a call. The frame paths (decoding, the server's
// workers, the client's reader and timeouts) go through the table and never switch on the
// code, so a new request type is a new entry here, the Handler method and Client.Send method
// that serve it, its messages in protocol and codec.go (the message constraint, inBounds and
// the request and response unions), and nothing else.

// method is a table entry as the frame paths see it: the operations that need the request's
// concrete types, behind one interface so those paths do not know them.
type method interface {
	requestCode() protocol.RequestCode
	// decodeRequest and decodeResponse reset the message's member of the union and decode
	// into it (the fast decoder if the entry has one and it can, else the library); they
	// return that member for the bounds check.
	decodeRequest(fd *frameDecoder, r *request) (any, error)
	decodeResponse(fd *frameDecoder, r *response) (any, error)
	// header is the request's header (sender, receiver, group).
	header(r *request) *protocol.Header
	// serve runs the Handler on t's request on a worker, sends the answer and releases t
	// (for an asynchronous Handler, once it replied).
	serve(s *Server, t *task)
	// keepsTask says the Handler may hold the request after serve returns (it answers
	// later), so the task is not recycled.
	keepsTask() bool
	// timeout is how long a call waits for its answer.
	timeout(o *ClientOptions) time.Duration
	// complete runs a call's done callback (done is the func(*Response, error) the caller
	// passed) with a copy of the response, or with err.
	complete(done any, r *response, err error)
}

// kind is the table entry for one request code; Q and P are its request and response
// messages.
//
// Q and P are not constrained to the message types: interface{ *Q; message } has an empty type
// set as far as the compiler can tell, which allows no pointer operations on it. The entries
// below are the only instantiations, and encodeFrameOf refuses any other type (inBounds).
type kind[Q, P any] struct {
	code protocol.RequestCode
	// req and resp are the request's and response's members of the decode unions.
	req  func(*request) *Q
	resp func(*response) *P
	// reqHeader and respHeader reach a message's Header (a type parameter has no fields).
	reqHeader  func(*Q) *protocol.Header
	respHeader func(*P) *protocol.Header
	// handle answers at once; handleLater answers through reply, exactly once, from any
	// goroutine (a leadership transfer: the transferee answers after its election). An entry
	// sets one of the two.
	handle      func(s *Server, req *Q) *P
	handleLater func(s *Server, req *Q, reply func(*P))
	// long: a call waits TransferTimeout instead of CallTimeout.
	long bool
	// fastReq and fastResp decode the common forms of the messages without the library
	// (codec_fast.go); nil: the library always.
	fastReq  func(*wireReader, *Q) bool
	fastResp func(*wireReader, *P) bool
}

// The table. methodOf finds an entry by its code.
var (
	voteMethod = &kind[protocol.VoteRequest, protocol.VoteResponse]{
		code:       protocol.RequestVote,
		req:        func(r *request) *protocol.VoteRequest { return &r.vote },
		resp:       func(r *response) *protocol.VoteResponse { return &r.vote },
		reqHeader:  func(m *protocol.VoteRequest) *protocol.Header { return &m.Header },
		respHeader: func(m *protocol.VoteResponse) *protocol.Header { return &m.Header },
		handle: func(s *Server, req *protocol.VoteRequest) *protocol.VoteResponse {
			return s.handler.HandleVote(req)
		},
		fastReq:  fastVoteRequest,
		fastResp: fastVoteResponse,
	}
	heartBeatMethod = &kind[protocol.HeartBeatRequest, protocol.HeartBeatResponse]{
		code:       protocol.RequestHeartBeat,
		req:        func(r *request) *protocol.HeartBeatRequest { return &r.hb },
		resp:       func(r *response) *protocol.HeartBeatResponse { return &r.hb },
		reqHeader:  func(m *protocol.HeartBeatRequest) *protocol.Header { return &m.Header },
		respHeader: func(m *protocol.HeartBeatResponse) *protocol.Header { return &m.Header },
		handle: func(s *Server, req *protocol.HeartBeatRequest) *protocol.HeartBeatResponse {
			return s.handler.HandleHeartBeat(req)
		},
		fastReq:  fastHeartBeatRequest,
		fastResp: fastHeartBeatResponse,
	}
	transferMethod = &kind[protocol.LeadershipTransferRequest, protocol.LeadershipTransferResponse]{
		code:       protocol.RequestLeadershipTransfer,
		req:        func(r *request) *protocol.LeadershipTransferRequest { return &r.lt },
		resp:       func(r *response) *protocol.LeadershipTransferResponse { return &r.lt },
		reqHeader:  func(m *protocol.LeadershipTransferRequest) *protocol.Header { return &m.Header },
		respHeader: func(m *protocol.LeadershipTransferResponse) *protocol.Header { return &m.Header },
		handleLater: func(s *Server, req *protocol.LeadershipTransferRequest, reply func(*protocol.LeadershipTransferResponse)) {
			s.handler.HandleLeadershipTransfer(req, reply)
		},
		long: true,
	}
	metadataMethod = &kind[protocol.MetadataRequest, protocol.MetadataResponse]{
		code:       protocol.RequestMetadata,
		req:        func(r *request) *protocol.MetadataRequest { return &r.meta },
		resp:       func(r *response) *protocol.MetadataResponse { return &r.meta },
		reqHeader:  func(m *protocol.MetadataRequest) *protocol.Header { return &m.Header },
		respHeader: func(m *protocol.MetadataResponse) *protocol.Header { return &m.Header },
		handle: func(s *Server, req *protocol.MetadataRequest) *protocol.MetadataResponse {
			// A member's client sends one first on every connection: that member is up.
			if s.opts.OnPeerHello != nil && req.LocalID != "" {
				s.opts.OnPeerHello(req.LocalID)
			}
			return s.handler.HandleMetadata(req)
		},
	}
	// hostHeartBeatMethod is served by a Mux with a host handler (SetHostHandler) only: the
	// Handler interface, which the elector implements, does not change.
	hostHeartBeatMethod = &kind[protocol.HostHeartBeatRequest, protocol.HostHeartBeatResponse]{
		code:       protocol.RequestHostHeartBeat,
		req:        func(r *request) *protocol.HostHeartBeatRequest { return &r.host },
		resp:       func(r *response) *protocol.HostHeartBeatResponse { return &r.host },
		reqHeader:  func(m *protocol.HostHeartBeatRequest) *protocol.Header { return &m.Header },
		respHeader: func(m *protocol.HostHeartBeatResponse) *protocol.Header { return &m.Header },
		handle: func(s *Server, req *protocol.HostHeartBeatRequest) *protocol.HostHeartBeatResponse {
			if s.mux != nil {
				if h := s.mux.hostHandler(); h != nil {
					return h(req)
				}
			}
			return &protocol.HostHeartBeatResponse{Header: protocol.Header{Code: protocol.CodeUnsupported}}
		},
		fastReq:  fastHostHeartBeatRequest,
		fastResp: fastHostHeartBeatResponse,
	}
	methods = [...]method{voteMethod, heartBeatMethod, transferMethod, metadataMethod, hostHeartBeatMethod}
)

// methodOf returns the table entry for code, or nil for a code we do not serve.
func methodOf(code protocol.RequestCode) method {
	for _, m := range methods {
		if m.requestCode() == code {
			return m
		}
	}
	return nil
}

func (k *kind[Q, P]) requestCode() protocol.RequestCode { return k.code }

func (k *kind[Q, P]) decodeRequest(fd *frameDecoder, r *request) (any, error) {
	m := k.req(r)
	return m, decodeWith(fd, m, k.fastReq)
}

func (k *kind[Q, P]) decodeResponse(fd *frameDecoder, r *response) (any, error) {
	m := k.resp(r)
	return m, decodeWith(fd, m, k.fastResp)
}

// decodeWith decodes the message at fd's position into m: with fast if it is set and can,
// else with the library (decodeMessage resets m first).
func decodeWith[M any](fd *frameDecoder, m *M, fast func(*wireReader, *M) bool) error {
	if fast != nil {
		var zero M
		*m = zero
		if fastDecode(fd, m, fast) {
			return nil
		}
	}
	return decodeMessage(fd.dec, m)
}

func (k *kind[Q, P]) header(r *request) *protocol.Header { return k.reqHeader(k.req(r)) }

func (k *kind[Q, P]) keepsTask() bool { return k.handleLater != nil }

func (k *kind[Q, P]) timeout(o *ClientOptions) time.Duration {
	if k.long {
		return o.TransferTimeout
	}
	return o.CallTimeout
}

func (k *kind[Q, P]) serve(s *Server, t *task) {
	req := k.req(&t.request)
	if k.handleLater == nil {
		k.reply(s, t, k.handle(s, req))
		s.release(t)
		return
	}
	// The slot stays taken until the answer, and only the first reply counts.
	var replied atomic.Bool
	k.handleLater(s, req, func(resp *P) {
		if !replied.CompareAndSwap(false, true) {
			return
		}
		k.reply(s, t, resp)
		s.release(t)
	})
}

// reply encodes the Handler's answer and queues it on t's connection. A nil answer is
// counted and nothing is sent; an UNKNOWN_GROUP answer goes out as the code alone.
func (k *kind[Q, P]) reply(s *Server, t *task, resp *P) {
	if fb, err := k.answerFrame(s, t, resp); fb != nil || err != nil {
		s.sendReply(t, fb, err)
	}
}

// answerFrame encodes the Handler's answer to t as a frame; both nil: nothing to send (a nil
// answer, counted). An UNKNOWN_GROUP answer is encoded as the code alone.
func (k *kind[Q, P]) answerFrame(s *Server, t *task, resp *P) (*frameBuf, error) {
	if resp == nil {
		s.obs.rpcError(k.code, ReasonNilResponse, t.conn.remote)
		return nil, nil
	}
	if foreign(k.respHeader(resp)) {
		resp = new(P)
		*k.respHeader(resp) = refusedHeader
	}
	return encodeFrameOf(t.id, k.code, true, resp, s.maxPlain)
}

func (k *kind[Q, P]) complete(done any, r *response, err error) {
	f := done.(func(*P, error))
	if err != nil {
		f(nil, err)
		return
	}
	resp := new(P)
	*resp = *k.resp(r)
	f(resp, nil)
}

// send is every Client.Send method: it starts a call of k's code to peer to.
func send[Q, P any](cl *Client, k *kind[Q, P], to string, req *Q, done func(*P, error)) {
	sendWithin(cl, k, to, req, 0, done)
}

// sendWithin is send with the call's own timeout (0: the method's default).
func sendWithin[Q, P any](cl *Client, k *kind[Q, P], to string, req *Q, timeout time.Duration, done func(*P, error)) {
	c := cl.newCall(k)
	c.done = done
	c.timeout = timeout
	if p, id := cl.begin(to, c); p != nil {
		fb, err := encodeFrameOf(id, k.code, false, req, cl.maxPlain)
		p.submit(c, id, fb, err)
	}
}
