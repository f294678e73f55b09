package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Frame layout (see the package comment):
//
//	frame = length (uint32, big-endian, bytes of body) | body
//	body  = msgpack array [id uint64, code int32, response bool, message map, newer fields...]
//
// The envelope is a fixed array rather than a map so the receiver learns the request code
// before it reaches the message and can decode straight into the right concrete struct.
// Messages are the protocol structs as the msgpack library writes them: maps keyed by their
// msgpack tags, the embedded Header inline.

const (
	frameHeaderLen = 4
	envelopeLen    = 4

	// DefaultMaxFrameSize bounds a frame body. Our largest message (metadata with a peers
	// string) is a few hundred bytes; 64 KiB leaves room and bounds what a peer can make us
	// buffer before we decide the frame is bad.
	DefaultMaxFrameSize = 64 << 10
)

var (
	errFrameSize      = errors.New("rpc: frame length is zero or above the maximum frame size")
	errEnvelope       = errors.New("rpc: frame body is not an [id, code, response, message] array")
	errMessage        = errors.New("rpc: message is not a map")
	errUnknownCode    = errors.New("rpc: unknown request code")
	errUnexpectedKind = errors.New("rpc: request where a response was expected, or the reverse")
	errOutOfRange     = errors.New("rpc: a term or ledger value outside protocol.MaxTerm / MaxLedgerValue")
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

// message is the set of types that go on the wire; the constraint keeps anything else (an
// interface{}, a map) from being encoded as a message by mistake.
type message interface {
	*protocol.VoteRequest | *protocol.VoteResponse |
		*protocol.HeartBeatRequest | *protocol.HeartBeatResponse |
		*protocol.LeadershipTransferRequest | *protocol.LeadershipTransferResponse |
		*protocol.MetadataRequest | *protocol.MetadataResponse |
		*protocol.HostHeartBeatRequest | *protocol.HostHeartBeatResponse
}

// encodeFrame encodes a whole frame (length, envelope, msg) into a pooled buffer; the caller
// owns the buffer and returns it with putFrameBuf once written. What the peer would refuse is
// refused here, so only this call fails rather than the connection and every call on it: a
// term or ledger value out of bounds (errOutOfRange) and a frame above maxSize
// (errFrameSize). (Those are the only errors in practice: the writer never fails, and the
// messages hold only strings and integers.)
func encodeFrame[M message](id uint64, code protocol.RequestCode, response bool, msg M, maxSize int) (*frameBuf, error) {
	return encodeFrameOf(id, code, response, msg, maxSize)
}

// encodeFrameOf is encodeFrame for the method table (method.go), whose type parameters can
// not be constrained to message; msg is one of the message pointer types (anything else is
// refused as out of range), and converting it to any does not allocate.
func encodeFrameOf(id uint64, code protocol.RequestCode, response bool, msg any, maxSize int) (*frameBuf, error) {
	if !inBounds(msg) || !confInBounds(msg) {
		return nil, errOutOfRange
	}
	fb := getFrameBuf()
	if err := encodeInto(fb, id, code, response, msg, maxSize); err != nil {
		putFrameBuf(fb)
		return nil, err
	}
	return fb, nil
}

// encodeInto replaces fb's contents with the frame, using fb's encoder.
func encodeInto(fb *frameBuf, id uint64, code protocol.RequestCode, response bool, msg any, maxSize int) error {
	// The length, written below, and the envelope, in the bytes the library's EncodeArrayLen,
	// EncodeUint, EncodeInt and EncodeBool write (codec_fast_enc.go).
	b := append(fb.b[:0], 0, 0, 0, 0, msgpcode.FixedArrayLow|envelopeLen)
	b = wireInt(wireUint(b, id), int64(code))
	if response {
		b = append(b, msgpcode.True)
	} else {
		b = append(b, msgpcode.False)
	}
	fb.b = b
	if err := encodeMessageInto(fb, msg); err != nil {
		return err
	}
	n := len(fb.b) - frameHeaderLen
	if n > maxSize {
		return errFrameSize
	}
	binary.BigEndian.PutUint32(fb.b, uint32(n))
	return nil
}

// encodeMessage encodes msg with the library. A struct with an omitempty field takes the
// library's slower path, which allocates the list of fields to write on every call; a
// heartbeat answer's LedgerUnknown is false but for an abstaining follower, and a heartbeat's
// Epoch is 0 but on a host with a liveness table, so the common cases are encoded as the same
// structs with those fields left out or always written (the bytes omitempty would give), and
// allocate nothing.
func encodeMessage(e *msgpack.Encoder, msg any) error {
	return e.Encode(wireForm(msg))
}

// encodeMessageInto encodes msg into fb: the common forms by fastEncode (codec_fast_enc.go),
// the rest by fb's encoder (encodeMessage).
func encodeMessageInto(fb *frameBuf, msg any) error {
	if b, ok := fastEncode(fb.b, msg); ok {
		fb.b = b
		return nil
	}
	return encodeMessage(fb.enc, msg)
}

// wireForm is msg as encodeMessage hands it to the library (see encodeMessage).
func wireForm(msg any) any {
	switch r := msg.(type) {
	case *protocol.HeartBeatRequest:
		return heartBeatRequestWire(r)
	case *protocol.HeartBeatResponse:
		return heartBeatResponseWire(r)
	case *protocol.VoteRequest:
		if r.ConfEpoch == 0 && r.ConfTerm == 0 && !r.Probe {
			return (*voteRequestPlain)(r)
		}
	case *protocol.VoteResponse:
		if r.ConfEpoch == 0 && r.ConfTerm == 0 && r.Conf == nil && r.Pending == nil {
			return (*voteResponsePlain)(r)
		}
	}
	return msg
}

// voteRequestPlain and voteResponsePlain are a vote request and its answer in a group whose
// configuration never changed (issue 31: no version to send) and not a probe: the bytes
// omitempty gives, without its cost (a cold start or a host's crash encodes thousands at
// once, issue 29).
type voteRequestPlain struct {
	protocol.Header `msgpack:",inline"`
	LedgerEndTerm   int64  `msgpack:"ledgerEndTerm"`
	LedgerEndIndex  int64  `msgpack:"ledgerEndIndex"`
	ConfEpoch       uint64 `msgpack:"-"` // zero in this fast path
	ConfTerm        int64  `msgpack:"-"`
	Probe           bool   `msgpack:"-"`
}

type voteResponsePlain struct {
	protocol.Header `msgpack:",inline"`
	VoteResult      protocol.VoteResult  `msgpack:"voteResult"`
	ConfEpoch       uint64               `msgpack:"-"` // zero in this fast path
	ConfTerm        int64                `msgpack:"-"`
	Conf, Pending   *protocol.WireConfig `msgpack:"-"`
}

// heartBeatRequestWire is r as encodeMessage hands it to the library: r itself when it carries
// a configuration or a configuration version with a table epoch (rare: the library's path), else
// r converted to the struct that writes the bytes omitempty would give without its cost.
func heartBeatRequestWire(r *protocol.HeartBeatRequest) any {
	switch {
	case r.Conf != nil || r.Pending != nil: // a configuration to carry (issue 31): rare, the library's path
		return r
	case r.ConfEpoch != 0 && r.ConfTerm != 0 && r.Epoch == 0: // a group that changed (issue 31)
		return (*heartBeatRequestConf)(r)
	case r.ConfEpoch != 0 || r.ConfTerm != 0:
		return r
	case r.Epoch == 0:
		return (*heartBeatRequestPlain)(r)
	}
	return (*heartBeatRequestEpoch)(r)
}

// heartBeatResponseWire is r as encodeMessage hands it to the library: converted for a member
// that knows its ledger and reports either no configuration version or (with no table epoch)
// all of them, else r itself (the library's path).
func heartBeatResponseWire(r *protocol.HeartBeatResponse) any {
	if r.LedgerUnknown {
		return r
	}
	switch {
	case r.ConfEpoch == 0 && r.ConfTerm == 0 && r.CommitEpoch == 0 && r.CommitTerm == 0:
		if r.Epoch == 0 {
			return (*heartBeatResponseKnown)(r)
		}
		return (*heartBeatResponseKnownEpoch)(r)
	case r.Epoch == 0 && r.ConfEpoch != 0 && r.ConfTerm != 0 && r.CommitEpoch != 0 && r.CommitTerm != 0:
		return (*heartBeatResponseKnownConf)(r) // a group that changed (issue 31)
	}
	return r
}

// heartBeatRequestPlain and heartBeatRequestEpoch are protocol.HeartBeatRequest without its
// omitempty field, and with it always written (Go converts between struct types that differ
// only in tags).
type heartBeatRequestPlain struct {
	protocol.Header `msgpack:",inline"`
	Successors      string               `msgpack:"successors"`
	Epoch           uint64               `msgpack:"-"`
	ConfEpoch       uint64               `msgpack:"-"` // issue 31: zero in this fast path
	ConfTerm        int64                `msgpack:"-"`
	Conf, Pending   *protocol.WireConfig `msgpack:"-"`
}

type heartBeatRequestEpoch struct {
	protocol.Header `msgpack:",inline"`
	Successors      string               `msgpack:"successors"`
	Epoch           uint64               `msgpack:"epoch"`
	ConfEpoch       uint64               `msgpack:"-"` // issue 31: zero in this fast path
	ConfTerm        int64                `msgpack:"-"`
	Conf, Pending   *protocol.WireConfig `msgpack:"-"`
}

// heartBeatRequestConf is a heartbeat of a group whose configuration changed (issue 31), with
// no table epoch and no configuration to carry: its version always written, the bytes
// omitempty gives when both are non-zero.
type heartBeatRequestConf struct {
	protocol.Header `msgpack:",inline"`
	Successors      string               `msgpack:"successors"`
	Epoch           uint64               `msgpack:"-"`
	ConfEpoch       uint64               `msgpack:"confEpoch"`
	ConfTerm        int64                `msgpack:"confTerm"`
	Conf, Pending   *protocol.WireConfig `msgpack:"-"`
}

// heartBeatResponseKnownConf is the answer of such a group's follower, which knows its ledger
// and reports non-zero configuration versions.
type heartBeatResponseKnownConf struct {
	protocol.Header `msgpack:",inline"`
	LedgerEndTerm   int64  `msgpack:"ledgerEndTerm"`
	LedgerEndIndex  int64  `msgpack:"ledgerEndIndex"`
	LedgerUnknown   bool   `msgpack:"-"`
	Epoch           uint64 `msgpack:"-"`
	ConfEpoch       uint64 `msgpack:"confEpoch"`
	ConfTerm        int64  `msgpack:"confTerm"`
	CommitEpoch     uint64 `msgpack:"commitEpoch"`
	CommitTerm      int64  `msgpack:"commitTerm"`
}

// heartBeatResponseKnown and heartBeatResponseKnownEpoch are protocol.HeartBeatResponse of a
// member that knows its ledger, without and with an epoch.
type heartBeatResponseKnown struct {
	protocol.Header `msgpack:",inline"`
	LedgerEndTerm   int64  `msgpack:"ledgerEndTerm"`
	LedgerEndIndex  int64  `msgpack:"ledgerEndIndex"`
	LedgerUnknown   bool   `msgpack:"-"`
	Epoch           uint64 `msgpack:"-"`
	ConfEpoch       uint64 `msgpack:"-"` // issue 31: zero in this fast path
	ConfTerm        int64  `msgpack:"-"`
	CommitEpoch     uint64 `msgpack:"-"`
	CommitTerm      int64  `msgpack:"-"`
}

type heartBeatResponseKnownEpoch struct {
	protocol.Header `msgpack:",inline"`
	LedgerEndTerm   int64  `msgpack:"ledgerEndTerm"`
	LedgerEndIndex  int64  `msgpack:"ledgerEndIndex"`
	LedgerUnknown   bool   `msgpack:"-"`
	Epoch           uint64 `msgpack:"epoch"`
	ConfEpoch       uint64 `msgpack:"-"` // issue 31: zero in this fast path
	ConfTerm        int64  `msgpack:"-"`
	CommitEpoch     uint64 `msgpack:"-"`
	CommitTerm      int64  `msgpack:"-"`
}

// --- decoding ---------------------------------------------------------------------------

// frameDecoder decodes frame bodies with the msgpack library, but only bodies that passed
// validate (validate.go). Each server connection and each client reader owns one, so the
// library's decoder and its reader are reused for every frame; it is not safe for
// concurrent use. The zero value is ready to use.
type frameDecoder struct {
	r       bytes.Reader
	dec     *msgpack.Decoder
	lastLen int // body length of the previous frame
	// body is the frame being decoded (what r reads), for the fast decoders (codec_fast.go),
	// and ids the strings they keep.
	body []byte
	ids  idCache
	wr   wireReader
}

// envelope is the part of a frame body before the message.
type envelope struct {
	id       uint64
	code     protocol.RequestCode
	response bool
	extra    int // envelope elements after the message, from a newer peer; skipped
}

// open validates a whole frame body, then reads the envelope and leaves the decoder on the
// message. The library never sees a body that failed validation.
//
// Each envelope value's type code is peeked at before the library reads it, so a value of
// the wrong type is refused with our own error; the library would build a formatted error,
// and refusing a bad frame should cost nothing.
func (fd *frameDecoder) open(body []byte) (envelope, error) {
	if err := validate(body); err != nil {
		return envelope{}, err
	}
	fd.r.Reset(body)
	fd.body = body
	// The library's decoder keeps a scratch buffer as large as the longest string it has
	// read. After a large frame, start over with a fresh decoder rather than pin up to
	// MaxFrameSize per connection; heartbeats are far below the threshold.
	if fd.dec == nil || fd.lastLen > frameBufKeep {
		fd.dec = msgpack.NewDecoder(&fd.r) // a bytes.Reader is a ByteScanner: no extra buffering
	}
	fd.lastLen = len(body)
	return readEnvelope(fd.dec)
}

// readEnvelope reads the envelope of a validated body, up to the message.
func readEnvelope(d *msgpack.Decoder) (envelope, error) {
	if c, _ := d.PeekCode(); !isArray(c) {
		return envelope{}, errEnvelope
	}
	n, err := d.DecodeArrayLen()
	if err != nil || n < envelopeLen {
		return envelope{}, errEnvelope
	}
	env := envelope{extra: n - envelopeLen}
	if env.id, err = decodeID(d); err != nil {
		return envelope{}, err
	}
	if env.code, err = decodeCode(d); err != nil {
		return envelope{}, err
	}
	if c, _ := d.PeekCode(); c != msgpcode.True && c != msgpcode.False && c != msgpcode.Nil {
		return envelope{}, errEnvelope
	}
	if env.response, err = d.DecodeBool(); err != nil {
		return envelope{}, errEnvelope
	}
	if c, _ := d.PeekCode(); !isMap(c) {
		return envelope{}, errMessage // the library would also take nil or an array here
	}
	return env, nil
}

// decodeCode reads the request code, an int32 written as any integer; a value beyond int32 is
// refused rather than narrowed.
func decodeCode(d *msgpack.Decoder) (protocol.RequestCode, error) {
	if c, _ := d.PeekCode(); !isInt(c) {
		return 0, errEnvelope
	}
	code, err := d.DecodeInt64()
	if err != nil || code < math.MinInt32 || code > math.MaxInt32 {
		return 0, errEnvelope
	}
	return protocol.RequestCode(code), nil
}

// decodeID reads the request id, an unsigned integer. A sender may write a non-negative id in
// a signed form; a negative one is refused rather than wrapped.
func decodeID(d *msgpack.Decoder) (uint64, error) {
	c, _ := d.PeekCode()
	switch {
	case !isInt(c):
		return 0, errEnvelope
	case c >= msgpcode.NegFixedNumLow, c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64:
		v, err := d.DecodeInt64()
		if err != nil || v < 0 {
			return 0, errEnvelope
		}
		return uint64(v), nil
	}
	v, err := d.DecodeUint64()
	if err != nil {
		return 0, errEnvelope
	}
	return v, nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// isInt reports an integer code, or nil, which the library reads as 0.
func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || c == msgpcode.Nil ||
		(c >= msgpcode.Uint8 && c <= msgpcode.Int64) // 0xcc-0xd3: uint8-64, int8-64
}

// Terms and ledger values are bounded on the wire, in both directions (protocol/limits.go):
// a term is in [0, MaxTerm], a ledger end term or index in [-1, MaxLedgerValue] (-1: an empty
// ledger). A message with a value outside is a bad frame, refused before anything reaches
// the elector, so no arithmetic there can wrap (issue 18: a heartbeat at term 2^63-1 made
// term+1 negative). Every int64 field of every message is a term or a ledger value;
// TestWireBoundsEveryField fails if one is added without a check here.

func termOK(t int64) bool   { return t >= 0 && t <= protocol.MaxTerm }
func ledgerOK(v int64) bool { return v >= -1 && v <= protocol.MaxLedgerValue }

// inBounds reports whether every term and ledger value of m is within the bounds above.
// (m is always one of the message pointer types: converting one to any does not allocate.)
func inBounds(m any) bool {
	switch m := m.(type) {
	case *protocol.VoteRequest:
		return ledgerEndMessageOK(m.Term, m.LedgerEndTerm, m.LedgerEndIndex)
	case *protocol.VoteResponse:
		return termOK(m.Term)
	case *protocol.HeartBeatRequest:
		return termOK(m.Term)
	case *protocol.HeartBeatResponse:
		return ledgerEndMessageOK(m.Term, m.LedgerEndTerm, m.LedgerEndIndex)
	case *protocol.LeadershipTransferRequest:
		return termOK(m.Term) && ledgerOK(m.TakeLeadershipLedgerIndex)
	case *protocol.LeadershipTransferResponse:
		return termOK(m.Term)
	case *protocol.MetadataRequest:
		return termOK(m.Term)
	case *protocol.MetadataResponse:
		return ledgerEndMessageOK(m.Term, m.LedgerEndTerm, m.LedgerEndIndex)
	case *protocol.HostHeartBeatRequest:
		return hostMessageOK(m.Term, len(m.Changes))
	case *protocol.HostHeartBeatResponse:
		return hostMessageOK(m.Term, len(m.Changes))
	}
	return false
}

// ledgerEndMessageOK bounds a message that reports a ledger end: its term and the ledger end.
func ledgerEndMessageOK(term, endTerm, endIndex int64) bool {
	return termOK(term) && ledgerEndOK(endTerm, endIndex)
}

// hostMessageOK bounds a host message: its term and how many changes it carries.
func hostMessageOK(term int64, changes int) bool {
	return termOK(term) && changes <= protocol.MaxHostChanges
}

// confInBounds reports whether the configuration fields of m (issue 31, docs/protocol.md 13)
// are within bounds; inBounds checks the rest, and both must hold.
func confInBounds(m any) bool {
	switch m := m.(type) {
	case *protocol.VoteRequest:
		return confOK(m.ConfEpoch, m.ConfTerm)
	case *protocol.VoteResponse:
		return confOK(m.ConfEpoch, m.ConfTerm) && wireConfigOK(m.Conf) && wireConfigOK(m.Pending)
	case *protocol.HeartBeatRequest:
		return confOK(m.ConfEpoch, m.ConfTerm) && wireConfigOK(m.Conf) && wireConfigOK(m.Pending)
	case *protocol.HeartBeatResponse:
		return confOK(m.ConfEpoch, m.ConfTerm) && confOK(m.CommitEpoch, m.CommitTerm)
	}
	return true
}

// confOK bounds a configuration version (issue 31): an epoch at most MaxConfigEpoch, a term
// as any term.
func confOK(epoch uint64, term int64) bool { return epoch <= protocol.MaxConfigEpoch && termOK(term) }

// wireConfigOK bounds a configuration on the wire: its version, each peers string at most
// MaxPeersString bytes and its keys at most MaxKeysString (the elector parses and checks the
// rest).
func wireConfigOK(c *protocol.WireConfig) bool {
	return c == nil || (confOK(c.Epoch, c.Term) && len(c.Voters) <= protocol.MaxPeersString &&
		len(c.NonVoters) <= protocol.MaxPeersString && len(c.Keys) <= protocol.MaxKeysString)
}

// ledgerEndOK bounds a ledger end (its term and index).
func ledgerEndOK(term, index int64) bool { return ledgerOK(term) && ledgerOK(index) }

// decodeMessage resets m, then lets the library decode the message map into it. The reset
// matters: the library leaves fields absent from the map untouched, and m is reused from
// frame to frame. Keys m does not have are skipped, so a newer peer can add fields.
func decodeMessage[M any](d *msgpack.Decoder, m *M) error {
	var zero M
	*m = zero
	return d.Decode(m)
}

// Enumerations are range-checked as the library decodes them. Left to itself it converts a
// wire integer to the field's narrow type as Go conversions do, so voteResult 257 would read
// as 1, ACCEPT, and code 2^32+200 as SUCCESS. A value outside the set this version knows
// reads as UNKNOWN instead (VoteUnknown, CodeUnknown, Role UNKNOWN), the value the protocol
// already gives an answer that carries no information (docs/protocol.md 5.2: a timeout is UNKNOWN), which
// the elector never counts for anything. We map rather than refuse the frame: refusing would
// close the connection and fail every other call in flight on it, and would cut off a newer
// member that added a value, for an answer the elector ignores either way.
//
// Register is process-wide; these are our own types, and the rpc codec is their only user.
func init() {
	msgpack.Register(protocol.VoteResult(0), nil, decodeEnum(protocol.VoteResult.Known, protocol.VoteUnknown))
	msgpack.Register(protocol.Role(0), nil, decodeEnum(protocol.Role.Known, protocol.UNKNOWN))
	// 0 is not a response code, but it is what every request carries: requests leave the
	// code unset.
	msgpack.Register(protocol.ResponseCode(0), nil, decodeEnum(func(c protocol.ResponseCode) bool {
		return c == 0 || c.Known()
	}, protocol.CodeUnknown))
}

// decodeEnum returns a library decoder for the enumeration E: the wire integer is compared
// with the known set before it is narrowed. Anything that is not an integer is refused as
// the library refuses it.
func decodeEnum[E ~int8 | ~int32](known func(E) bool, unknown E) func(*msgpack.Decoder, reflect.Value) error {
	return func(d *msgpack.Decoder, v reflect.Value) error {
		n, err := d.DecodeInt64()
		if err != nil {
			return err
		}
		e := E(n)
		if int64(e) != n || !known(e) {
			e = unknown
		}
		v.SetInt(int64(e))
		return nil
	}
}

// close skips envelope elements we do not know and checks nothing is left.
func (fd *frameDecoder) close(env envelope) error {
	for i := 0; i < env.extra; i++ {
		if err := fd.dec.Skip(); err != nil {
			return err
		}
	}
	if fd.r.Len() != 0 { // validate already made sure; a cheap second look
		return errTrailing
	}
	return nil
}

// finish completes a decode: the library's error, the envelope's tail, then the bounds.
func (fd *frameDecoder) finish(env envelope, msg any, err error) error {
	if err != nil {
		return err
	}
	if err := fd.close(env); err != nil {
		return err
	}
	if !inBounds(msg) || !confInBounds(msg) {
		return errOutOfRange
	}
	return nil
}

// request holds one decoded request. Only the field selected by code is meaningful; the
// union lets a pooled request serve every code without an interface{} anywhere. m is code's
// entry in the method table.
type request struct {
	id   uint64
	code protocol.RequestCode
	m    method
	vote protocol.VoteRequest
	hb   protocol.HeartBeatRequest
	lt   protocol.LeadershipTransferRequest
	meta protocol.MetadataRequest
	host protocol.HostHeartBeatRequest
}

// response holds one decoded response, like request does for requests.
type response struct {
	id   uint64
	code protocol.RequestCode
	vote protocol.VoteResponse
	hb   protocol.HeartBeatResponse
	lt   protocol.LeadershipTransferResponse
	meta protocol.MetadataResponse
	host protocol.HostHeartBeatResponse
}

// decodeRequest decodes a request frame body (the server side).
func (fd *frameDecoder) decodeRequest(body []byte, r *request) error {
	env, err := fd.openAs(body, false)
	if err != nil {
		return err
	}
	r.id, r.code, r.m = env.id, env.code, methodOf(env.code)
	if r.m == nil {
		return errUnknownCode
	}
	msg, err := r.m.decodeRequest(fd, r)
	return fd.finish(env, msg, err)
}

// decodeResponse decodes a response frame body (the client side).
func (fd *frameDecoder) decodeResponse(body []byte, r *response) error {
	env, err := fd.openAs(body, true)
	if err != nil {
		return err
	}
	r.id, r.code = env.id, env.code
	m := methodOf(env.code)
	if m == nil {
		return errUnknownCode
	}
	msg, err := m.decodeResponse(fd, r)
	return fd.finish(env, msg, err)
}

// openAs opens a body that must be a response (or a request).
func (fd *frameDecoder) openAs(body []byte, response bool) (envelope, error) {
	env, err := fd.open(body)
	if err == nil && env.response != response {
		err = errUnexpectedKind
	}
	return env, err
}
