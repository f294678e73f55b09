package rpc

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Frame layout (see the package comment):
//
//	frame = length (uint32, big-endian, bytes of body) | body
//	body  = msgpack array [id uint64, code int32, response bool, message map, newer fields...]
//
// The envelope is a fixed array rather than a map so the receiver learns the request code
// before it reaches the message and can decode straight into the right concrete struct.
// Messages are maps keyed by the msgpack tags of the protocol structs.

const (
	frameHeaderLen = 4
	envelopeLen    = 4

	// DefaultMaxFrameSize bounds a frame body. Our largest message (metadata with a peers
	// string) is a few hundred bytes; 64 KiB leaves room and bounds what a peer can make us
	// buffer before we decide the frame is bad.
	DefaultMaxFrameSize = 64 << 10
)

// Map keys: the msgpack tags of protocol.Header and the messages. The tests check them
// against the struct tags, so a field added to protocol without a key here fails a test.
const (
	keyGroup                     = "group"
	keyRemoteID                  = "remoteId"
	keyLocalID                   = "localId"
	keyLeaderID                  = "leaderId"
	keyTerm                      = "term"
	keyCode                      = "code"
	keyLedgerEndTerm             = "ledgerEndTerm"
	keyLedgerEndIndex            = "ledgerEndIndex"
	keyVoteResult                = "voteResult"
	keyTransferID                = "transferId"
	keyTransfereeID              = "transfereeId"
	keyTakeLeadershipLedgerIndex = "takeLeadershipLedgerIndex"
	keyRole                      = "role"
	keyVoteFor                   = "voteFor"
	keyPeers                     = "peers"
	headerFields                 = 6
)

var (
	errFrameSize      = errors.New("rpc: frame length is zero or above the maximum frame size")
	errEnvelope       = errors.New("rpc: frame body is not an [id, code, response, message] array")
	errUnknownCode    = errors.New("rpc: unknown request code")
	errUnexpectedKind = errors.New("rpc: request where a response was expected, or the reverse")
)

// frameLength reads a frame header and checks the announced size against maxSize, before
// any body byte is read or buffered.
func frameLength(hdr []byte, maxSize int) (int, error) {
	n := binary.BigEndian.Uint32(hdr)
	if n == 0 || uint64(n) > uint64(maxSize) {
		return 0, errFrameSize
	}
	return int(n), nil
}

// --- encoding ---------------------------------------------------------------------------

// beginFrame appends a length placeholder and the envelope up to the message; the caller
// appends the message and calls finishFrame with the same start.
func beginFrame(b []byte, id uint64, code protocol.RequestCode, response bool) []byte {
	b = append(b, 0, 0, 0, 0)
	b = appendArrayLen(b, envelopeLen)
	b = appendUint(b, id)
	b = appendInt(b, int64(code))
	return appendBool(b, response)
}

// finishFrame writes the length of the frame starting at b[start:]. A frame above maxSize
// is cut off and reported: the peer would reject it anyway.
func finishFrame(b []byte, start, maxSize int) ([]byte, error) {
	n := len(b) - start - frameHeaderLen
	if n > maxSize {
		return b[:start], errFrameSize
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

func appendStrField(b []byte, key, v string) []byte { return appendStr(appendStr(b, key), v) }
func appendIntField(b []byte, key string, v int64) []byte {
	return appendInt(appendStr(b, key), v)
}

// appendHeader opens the message map (header fields plus extra) and writes the header.
func appendHeader(b []byte, h *protocol.Header, extra int) []byte {
	b = appendMapLen(b, headerFields+extra)
	b = appendStrField(b, keyGroup, h.Group)
	b = appendStrField(b, keyRemoteID, h.RemoteID)
	b = appendStrField(b, keyLocalID, h.LocalID)
	b = appendStrField(b, keyLeaderID, h.LeaderID)
	b = appendIntField(b, keyTerm, h.Term)
	return appendIntField(b, keyCode, int64(h.Code))
}

func appendVoteRequest(b []byte, m *protocol.VoteRequest) []byte {
	b = appendHeader(b, &m.Header, 2)
	b = appendIntField(b, keyLedgerEndTerm, m.LedgerEndTerm)
	return appendIntField(b, keyLedgerEndIndex, m.LedgerEndIndex)
}

func appendVoteResponse(b []byte, m *protocol.VoteResponse) []byte {
	b = appendHeader(b, &m.Header, 1)
	return appendIntField(b, keyVoteResult, int64(m.VoteResult))
}

func appendHeartBeatRequest(b []byte, m *protocol.HeartBeatRequest) []byte {
	return appendHeader(b, &m.Header, 0)
}

func appendHeartBeatResponse(b []byte, m *protocol.HeartBeatResponse) []byte {
	b = appendHeader(b, &m.Header, 2)
	b = appendIntField(b, keyLedgerEndTerm, m.LedgerEndTerm)
	return appendIntField(b, keyLedgerEndIndex, m.LedgerEndIndex)
}

func appendLeadershipTransferRequest(b []byte, m *protocol.LeadershipTransferRequest) []byte {
	b = appendHeader(b, &m.Header, 3)
	b = appendStrField(b, keyTransferID, m.TransferID)
	b = appendStrField(b, keyTransfereeID, m.TransfereeID)
	return appendIntField(b, keyTakeLeadershipLedgerIndex, m.TakeLeadershipLedgerIndex)
}

func appendLeadershipTransferResponse(b []byte, m *protocol.LeadershipTransferResponse) []byte {
	return appendHeader(b, &m.Header, 0)
}

func appendMetadataRequest(b []byte, m *protocol.MetadataRequest) []byte {
	return appendHeader(b, &m.Header, 0)
}

func appendMetadataResponse(b []byte, m *protocol.MetadataResponse) []byte {
	b = appendHeader(b, &m.Header, 5)
	b = appendIntField(b, keyRole, int64(m.Role))
	b = appendStrField(b, keyVoteFor, m.VoteFor)
	b = appendIntField(b, keyLedgerEndTerm, m.LedgerEndTerm)
	b = appendIntField(b, keyLedgerEndIndex, m.LedgerEndIndex)
	return appendStrField(b, keyPeers, m.Peers)
}

// --- decoding ---------------------------------------------------------------------------

// envelope is the part of a frame body before the message.
type envelope struct {
	id       uint64
	code     protocol.RequestCode
	response bool
	extra    int // envelope elements after the message, from a newer peer; skipped
}

// openEnvelope validates a whole frame body, then reads the envelope and leaves the cursor
// on the message. Nothing is decoded from a body that failed validation.
func (c *cursor) openEnvelope(body []byte) (envelope, error) {
	if err := validate(body); err != nil {
		return envelope{}, err
	}
	c.reset(body)
	n, err := c.arrayLen()
	if err != nil || n < envelopeLen {
		return envelope{}, errEnvelope
	}
	var env envelope
	env.extra = n - envelopeLen
	if env.id, err = c.uint64(); err != nil {
		return envelope{}, errEnvelope
	}
	code, err := c.int(math.MinInt32, math.MaxInt32)
	if err != nil {
		return envelope{}, errEnvelope
	}
	env.code = protocol.RequestCode(code)
	if env.response, err = c.bool(); err != nil {
		return envelope{}, errEnvelope
	}
	return env, nil
}

// closeEnvelope skips envelope elements we do not know and checks nothing is left.
func (c *cursor) closeEnvelope(env envelope) error {
	for i := 0; i < env.extra; i++ {
		if err := c.skip(); err != nil {
			return err
		}
	}
	if len(c.b) != 0 {
		return errTrailing
	}
	return nil
}

// header decodes one header field, or skips the value of a key nobody here knows: a newer
// peer may send fields we do not have yet.
func (c *cursor) header(h *protocol.Header, key []byte) (err error) {
	var v int64
	switch string(key) { // the compiler does not allocate to compare string(key)
	case keyGroup:
		h.Group, err = c.str()
	case keyRemoteID:
		h.RemoteID, err = c.str()
	case keyLocalID:
		h.LocalID, err = c.str()
	case keyLeaderID:
		h.LeaderID, err = c.str()
	case keyTerm:
		h.Term, err = c.int(math.MinInt64, math.MaxInt64)
	case keyCode:
		v, err = c.int(math.MinInt32, math.MaxInt32)
		h.Code = protocol.ResponseCode(v)
	default:
		err = c.skip()
	}
	return err
}

// Each message decoder first resets its target: fields absent from the message must read as
// zero, not as whatever the reused struct held before.

func (c *cursor) headerOnly(h *protocol.Header) error {
	*h = protocol.Header{}
	return c.fields(func(k []byte) error { return c.header(h, k) })
}

func (c *cursor) voteRequest(m *protocol.VoteRequest) error {
	*m = protocol.VoteRequest{}
	return c.fields(func(k []byte) (err error) {
		switch string(k) {
		case keyLedgerEndTerm:
			m.LedgerEndTerm, err = c.int(math.MinInt64, math.MaxInt64)
		case keyLedgerEndIndex:
			m.LedgerEndIndex, err = c.int(math.MinInt64, math.MaxInt64)
		default:
			err = c.header(&m.Header, k)
		}
		return err
	})
}

func (c *cursor) voteResponse(m *protocol.VoteResponse) error {
	*m = protocol.VoteResponse{}
	return c.fields(func(k []byte) (err error) {
		if string(k) != keyVoteResult {
			return c.header(&m.Header, k)
		}
		v, err := c.int(math.MinInt8, math.MaxInt8)
		m.VoteResult = protocol.VoteResult(v)
		return err
	})
}

func (c *cursor) heartBeatRequest(m *protocol.HeartBeatRequest) error {
	return c.headerOnly(&m.Header)
}

func (c *cursor) heartBeatResponse(m *protocol.HeartBeatResponse) error {
	*m = protocol.HeartBeatResponse{}
	return c.fields(func(k []byte) (err error) {
		switch string(k) {
		case keyLedgerEndTerm:
			m.LedgerEndTerm, err = c.int(math.MinInt64, math.MaxInt64)
		case keyLedgerEndIndex:
			m.LedgerEndIndex, err = c.int(math.MinInt64, math.MaxInt64)
		default:
			err = c.header(&m.Header, k)
		}
		return err
	})
}

func (c *cursor) leadershipTransferRequest(m *protocol.LeadershipTransferRequest) error {
	*m = protocol.LeadershipTransferRequest{}
	return c.fields(func(k []byte) (err error) {
		switch string(k) {
		case keyTransferID:
			m.TransferID, err = c.str()
		case keyTransfereeID:
			m.TransfereeID, err = c.str()
		case keyTakeLeadershipLedgerIndex:
			m.TakeLeadershipLedgerIndex, err = c.int(math.MinInt64, math.MaxInt64)
		default:
			err = c.header(&m.Header, k)
		}
		return err
	})
}

func (c *cursor) leadershipTransferResponse(m *protocol.LeadershipTransferResponse) error {
	return c.headerOnly(&m.Header)
}

func (c *cursor) metadataRequest(m *protocol.MetadataRequest) error {
	return c.headerOnly(&m.Header)
}

func (c *cursor) metadataResponse(m *protocol.MetadataResponse) error {
	*m = protocol.MetadataResponse{}
	return c.fields(func(k []byte) (err error) {
		var v int64
		switch string(k) {
		case keyRole:
			v, err = c.int(math.MinInt8, math.MaxInt8)
			m.Role = protocol.Role(v)
		case keyVoteFor:
			m.VoteFor, err = c.str()
		case keyLedgerEndTerm:
			m.LedgerEndTerm, err = c.int(math.MinInt64, math.MaxInt64)
		case keyLedgerEndIndex:
			m.LedgerEndIndex, err = c.int(math.MinInt64, math.MaxInt64)
		case keyPeers:
			m.Peers, err = c.str()
		default:
			err = c.header(&m.Header, k)
		}
		return err
	})
}

// request holds one decoded request. Only the field selected by code is meaningful; the
// union lets a pooled request serve every code without an interface{} anywhere.
type request struct {
	id   uint64
	code protocol.RequestCode
	vote protocol.VoteRequest
	hb   protocol.HeartBeatRequest
	lt   protocol.LeadershipTransferRequest
	meta protocol.MetadataRequest
}

// decodeRequest decodes a request frame body (the server side).
func (c *cursor) decodeRequest(body []byte, r *request) error {
	env, err := c.openEnvelope(body)
	if err != nil {
		return err
	}
	if env.response {
		return errUnexpectedKind
	}
	r.id, r.code = env.id, env.code
	switch env.code {
	case protocol.RequestVote:
		err = c.voteRequest(&r.vote)
	case protocol.RequestHeartBeat:
		err = c.heartBeatRequest(&r.hb)
	case protocol.RequestLeadershipTransfer:
		err = c.leadershipTransferRequest(&r.lt)
	case protocol.RequestMetadata:
		err = c.metadataRequest(&r.meta)
	default:
		return errUnknownCode
	}
	if err != nil {
		return err
	}
	return c.closeEnvelope(env)
}

// response holds one decoded response, like request does for requests.
type response struct {
	id   uint64
	code protocol.RequestCode
	vote protocol.VoteResponse
	hb   protocol.HeartBeatResponse
	lt   protocol.LeadershipTransferResponse
	meta protocol.MetadataResponse
}

// decodeResponse decodes a response frame body (the client side).
func (c *cursor) decodeResponse(body []byte, r *response) error {
	env, err := c.openEnvelope(body)
	if err != nil {
		return err
	}
	if !env.response {
		return errUnexpectedKind
	}
	r.id, r.code = env.id, env.code
	switch env.code {
	case protocol.RequestVote:
		err = c.voteResponse(&r.vote)
	case protocol.RequestHeartBeat:
		err = c.heartBeatResponse(&r.hb)
	case protocol.RequestLeadershipTransfer:
		err = c.leadershipTransferResponse(&r.lt)
	case protocol.RequestMetadata:
		err = c.metadataResponse(&r.meta)
	default:
		return errUnknownCode
	}
	if err != nil {
		return err
	}
	return c.closeEnvelope(env)
}
