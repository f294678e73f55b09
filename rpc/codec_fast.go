package rpc

// The common messages are decoded without the library's reflection (issue 29). A host's mass
// election decodes tens of thousands of votes and heartbeats and their answers; the library's
// struct decoder spent more on finding each field by name through reflection than on reading
// it, and copied every id out of the frame into a new string. fastDecoder reads the message
// maps of VoteRequest, VoteResponse, HeartBeatRequest and HeartBeatResponse directly from the
// validated body, and takes the member ids (and a heartbeat's successors) from a small cache
// of the strings this connection has seen, so a frame's ids cost no allocation.
//
// It reads only the plain forms: keys the message has, written as strings, and values in the
// forms the library takes for the field without conversion. Anything else (a key it does not
// know, a value of another type, a configuration to carry) makes it give up, and the library
// decodes the message from the start, as before: for any body the two never differ, the fast
// reader only reads less of them (FuzzDecodeFrame compares every accepted body with the
// library's reading).

import (
	"encoding/binary"
	"io"

	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// wireReader reads msgpack values from a body that passed validate; every read is still
// bounds-checked, and a failed one (ok false) makes the fast decoder give up.
type wireReader struct {
	b   []byte
	pos int
	ids *idCache
}

func (r *wireReader) next() (byte, bool) {
	if r.pos >= len(r.b) {
		return 0, false
	}
	c := r.b[r.pos]
	r.pos++
	return c, true
}

// take returns the next n bytes.
func (r *wireReader) take(n int) ([]byte, bool) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, false
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b, true
}

// length reads the big-endian length of w bytes (1, 2 or 4) that follows a type code.
func (r *wireReader) length(w int) (int, bool) {
	b, ok := r.take(w)
	if !ok {
		return 0, false
	}
	switch w {
	case 1:
		return int(b[0]), true
	case 2:
		return int(binary.BigEndian.Uint16(b)), true
	}
	return int(binary.BigEndian.Uint32(b)), true
}

// mapLen reads a map header.
func (r *wireReader) mapLen() (int, bool) {
	c, ok := r.next()
	switch {
	case !ok:
		return 0, false
	case msgpcode.IsFixedMap(c):
		return int(c & msgpcode.FixedMapMask), true
	case c == msgpcode.Map16:
		return r.length(2)
	case c == msgpcode.Map32:
		return r.length(4)
	}
	return 0, false
}

// key reads a map key written as a string (the library also takes nil and binary keys;
// those are left to it).
func (r *wireReader) key() ([]byte, bool) {
	c, ok := r.next()
	if !ok {
		return nil, false
	}
	n, ok := strLen(r, c, false)
	if !ok {
		return nil, false
	}
	return r.take(n)
}

// strLen reads the length of a string (or, with bin, binary) value whose type code is c;
// -1: nil, which the library reads as the empty string.
func strLen(r *wireReader, c byte, bin bool) (int, bool) {
	switch {
	case msgpcode.IsFixedString(c):
		return int(c & msgpcode.FixedStrMask), true
	case c == msgpcode.Str8 || (bin && c == msgpcode.Bin8):
		return r.length(1)
	case c == msgpcode.Str16 || (bin && c == msgpcode.Bin16):
		return r.length(2)
	case c == msgpcode.Str32 || (bin && c == msgpcode.Bin32):
		return r.length(4)
	case bin && c == msgpcode.Nil:
		return -1, true
	}
	return 0, false
}

// str reads a string field as the library does (nil, a string or binary); cached: from the
// connection's id cache.
func (r *wireReader) str(cached bool) (string, bool) {
	c, ok := r.next()
	if !ok {
		return "", false
	}
	n, ok := strLen(r, c, true)
	if !ok || n <= 0 {
		return "", ok
	}
	b, ok := r.take(n)
	if !ok {
		return "", false
	}
	if cached {
		return r.ids.get(b), true
	}
	return string(b), true
}

// uint reads an unsigned integer field as the library's DecodeUint64 does: nil is 0, and a
// negative integer is converted as Go converts (the bounds checks refuse what matters).
func (r *wireReader) uint() (uint64, bool) {
	c, ok := r.next()
	if !ok {
		return 0, false
	}
	if c == msgpcode.Nil {
		return 0, true
	}
	if msgpcode.IsFixedNum(c) {
		return uint64(int8(c)), true
	}
	var v uint64
	switch c {
	case msgpcode.Uint8, msgpcode.Int8:
		b, ok := r.take(1)
		if !ok {
			return 0, false
		}
		v = uint64(b[0])
		if c == msgpcode.Int8 {
			v = uint64(int8(b[0]))
		}
	case msgpcode.Uint16, msgpcode.Int16:
		b, ok := r.take(2)
		if !ok {
			return 0, false
		}
		v = uint64(binary.BigEndian.Uint16(b))
		if c == msgpcode.Int16 {
			v = uint64(int16(v))
		}
	case msgpcode.Uint32, msgpcode.Int32:
		b, ok := r.take(4)
		if !ok {
			return 0, false
		}
		v = uint64(binary.BigEndian.Uint32(b))
		if c == msgpcode.Int32 {
			v = uint64(int32(v))
		}
	case msgpcode.Uint64, msgpcode.Int64:
		b, ok := r.take(8)
		if !ok {
			return 0, false
		}
		v = binary.BigEndian.Uint64(b)
	default:
		return 0, false
	}
	return v, true
}

// int reads a signed integer field as the library's DecodeInt64 does: the same forms, the
// same conversions (uint() converts each form exactly as the library's int() does, read as
// int64).
func (r *wireReader) int() (int64, bool) {
	v, ok := r.uint()
	return int64(v), ok
}

// bool reads a boolean field: nil is false.
func (r *wireReader) bool() (bool, bool) {
	c, ok := r.next()
	switch {
	case !ok:
		return false, false
	case c == msgpcode.True:
		return true, true
	case c == msgpcode.False || c == msgpcode.Nil:
		return false, true
	}
	return false, false
}

// header reads the value of key k if it is a Header field (known), into h.
func (r *wireReader) header(k []byte, h *protocol.Header) (known, ok bool) {
	switch string(k) {
	case "group":
		h.Group, ok = r.str(false)
	case "remoteId":
		h.RemoteID, ok = r.str(true)
	case "localId":
		h.LocalID, ok = r.str(true)
	case "leaderId":
		h.LeaderID, ok = r.str(true)
	case "term":
		h.Term, ok = r.int()
	case "code":
		var n int64
		n, ok = r.int()
		h.Code = responseCodeOf(n)
	default:
		return false, true
	}
	return true, ok
}

// responseCodeOf and voteResultOf map a wire integer as the registered enum decoders do
// (codec.go's init).
func responseCodeOf(n int64) protocol.ResponseCode {
	c := protocol.ResponseCode(n)
	if int64(c) != n || !(c == 0 || c.Known()) {
		return protocol.CodeUnknown
	}
	return c
}

func voteResultOf(n int64) protocol.VoteResult {
	v := protocol.VoteResult(n)
	if int64(v) != n || !v.Known() {
		return protocol.VoteUnknown
	}
	return v
}

// readFields reads a message map into m, whose Header is h, handing each key that is not a
// Header field to field, which reads its value (known false: a key the fast reader leaves to
// the library). field is a plain function, not a closure: nothing is allocated per message.
func readFields[M any](r *wireReader, h *protocol.Header, m *M, field func(r *wireReader, k []byte, m *M) (known, ok bool)) bool {
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	for i := 0; i < n; i++ {
		k, ok := r.key()
		if !ok {
			return false
		}
		known, ok := r.header(k, h)
		if !known && ok {
			known, ok = field(r, k, m)
		}
		if !known || !ok {
			return false
		}
	}
	return true
}

func fastVoteRequest(r *wireReader, m *protocol.VoteRequest) bool {
	return readFields(r, &m.Header, m, fieldVoteRequest)
}

func fieldVoteRequest(r *wireReader, k []byte, m *protocol.VoteRequest) (known, ok bool) {
	switch string(k) {
	case "ledgerEndTerm":
		m.LedgerEndTerm, ok = r.int()
	case "ledgerEndIndex":
		m.LedgerEndIndex, ok = r.int()
	case "confEpoch":
		m.ConfEpoch, ok = r.uint()
	case "confTerm":
		m.ConfTerm, ok = r.int()
	case "probe":
		m.Probe, ok = r.bool()
	default:
		return false, false
	}
	return true, ok
}

func fastVoteResponse(r *wireReader, m *protocol.VoteResponse) bool {
	return readFields(r, &m.Header, m, fieldVoteResponse)
}

func fieldVoteResponse(r *wireReader, k []byte, m *protocol.VoteResponse) (known, ok bool) {
	switch string(k) {
	case "voteResult":
		var n int64
		n, ok = r.int()
		m.VoteResult = voteResultOf(n)
	case "confEpoch":
		m.ConfEpoch, ok = r.uint()
	case "confTerm":
		m.ConfTerm, ok = r.int()
	default: // conf and pending included: the library's
		return false, false
	}
	return true, ok
}

func fastHeartBeatRequest(r *wireReader, m *protocol.HeartBeatRequest) bool {
	return readFields(r, &m.Header, m, fieldHeartBeatRequest)
}

func fieldHeartBeatRequest(r *wireReader, k []byte, m *protocol.HeartBeatRequest) (known, ok bool) {
	switch string(k) {
	case "successors":
		m.Successors, ok = r.str(true)
	case "epoch":
		m.Epoch, ok = r.uint()
	case "confEpoch":
		m.ConfEpoch, ok = r.uint()
	case "confTerm":
		m.ConfTerm, ok = r.int()
	default: // conf and pending included: the library's
		return false, false
	}
	return true, ok
}

func fastHeartBeatResponse(r *wireReader, m *protocol.HeartBeatResponse) bool {
	return readFields(r, &m.Header, m, fieldHeartBeatResponse)
}

func fieldHeartBeatResponse(r *wireReader, k []byte, m *protocol.HeartBeatResponse) (known, ok bool) {
	switch string(k) {
	case "ledgerEndTerm":
		m.LedgerEndTerm, ok = r.int()
	case "ledgerEndIndex":
		m.LedgerEndIndex, ok = r.int()
	case "ledgerUnknown":
		m.LedgerUnknown, ok = r.bool()
	case "epoch":
		m.Epoch, ok = r.uint()
	case "confEpoch":
		m.ConfEpoch, ok = r.uint()
	case "confTerm":
		m.ConfTerm, ok = r.int()
	case "commitEpoch":
		m.CommitEpoch, ok = r.uint()
	case "commitTerm":
		m.CommitTerm, ok = r.int()
	default:
		return false, false
	}
	return true, ok
}

// fastDecode decodes the message at the decoder's position into m with fast, and moves the
// decoder past it; false: fast gave up, m may be half filled (the caller resets it) and the
// decoder has not moved.
func fastDecode[M any](fd *frameDecoder, m *M, fast func(*wireReader, *M) bool) bool {
	r := &fd.wr // the decoder's: a local would escape through fast, an allocation per frame
	*r = wireReader{b: fd.body, pos: len(fd.body) - fd.r.Len(), ids: &fd.ids}
	ok := fast(r, m)
	r.b = nil
	if !ok {
		return false
	}
	_, _ = fd.r.Seek(int64(r.pos), io.SeekStart) // the library's decoder reads fd.r unbuffered
	return true
}

// idCache holds the last ids a connection's frames carried: a host pair's frames name a
// handful of members, whatever the number of groups. Strings longer than idCacheMax are not
// kept, so a hostile peer can make it hold at most idCacheLen x idCacheMax bytes.
type idCache struct {
	s    [idCacheLen]string
	next int
}

const (
	idCacheLen = 8
	idCacheMax = 64
)

// get returns b as a string: the cached one equal to it, or a new one (then cached).
func (c *idCache) get(b []byte) string {
	for i := range c.s {
		if c.s[i] == string(b) && len(b) > 0 {
			return c.s[i]
		}
	}
	s := string(b)
	if len(b) <= idCacheMax {
		c.s[c.next] = s
		c.next = (c.next + 1) % idCacheLen
	}
	return s
}
