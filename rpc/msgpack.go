package rpc

import (
	"encoding/binary"
	"errors"
	"math"
)

// This file is a deliberately small msgpack subset: appenders for the types our messages use,
// a validator for untrusted bytes, and a cursor that reads validated bytes without allocating.
//
// Why not the msgpack library on the hot path: msgpack v5.4.1 allocates whatever a length
// header claims (upstream issue 401: five bytes can ask for gigabytes), and its struct
// decoder allocates every string it reads, so a heartbeat could never be allocation-free.
// The tests use the library as the reference implementation: both directions are checked
// against it for every message type, so the bytes here are ordinary msgpack.

// maxDepth bounds nesting in a frame. Our envelope is an array holding a flat map (depth 2);
// the slack lets a newer peer add a small structured field that we skip.
const maxDepth = 8

// Errors from the validator and the cursor. They all mean "this peer sent a bad frame".
var (
	errTruncated = errors.New("msgpack: value runs past the end of the frame")
	errTooDeep   = errors.New("msgpack: nesting too deep")
	errBadCode   = errors.New("msgpack: invalid type code")
	errTrailing  = errors.New("msgpack: trailing bytes after the envelope")
	errType      = errors.New("msgpack: unexpected type for field")
	errRange     = errors.New("msgpack: integer out of range for field")
)

// --- encoding ---------------------------------------------------------------------------

func appendNil(b []byte) []byte { return append(b, 0xc0) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// appendUint writes v in its smallest msgpack form.
func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// appendInt writes v in its smallest msgpack form.
func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v)) // negative fixint
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// --- validation -------------------------------------------------------------------------

// validate checks that b holds exactly one msgpack value whose every length header fits in
// the bytes actually present and whose nesting is at most maxDepth. It allocates nothing
// and does work proportional to len(b), whatever the headers claim: a container of n
// elements needs at least n more bytes, so n is checked against what remains before any
// element is visited. Everything decoded from the network passes through here first.
func validate(b []byte) error {
	rest, err := skipValue(b, 1)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errTrailing
	}
	return nil
}

// skipValue returns b without its first value.
func skipValue(b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	if len(b) == 0 {
		return nil, errTruncated
	}
	c := b[0]
	b = b[1:]
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // ints, nil, bools
		return b, nil
	case c <= 0x8f: // fixmap
		return skipElems(b, 2*int(c&0x0f), depth)
	case c <= 0x9f: // fixarray
		return skipElems(b, int(c&0x0f), depth)
	case c <= 0xbf: // fixstr
		return skipBytes(b, int(c&0x1f))
	}
	switch c {
	case 0xcc, 0xd0: // uint8, int8
		return skipBytes(b, 1)
	case 0xcd, 0xd1: // uint16, int16
		return skipBytes(b, 2)
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return skipBytes(b, 4)
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return skipBytes(b, 8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16: a type byte and the data
		return skipBytes(b, 1+1<<(c-0xd4))
	case 0xc4, 0xd9: // bin8, str8
		return skipSized(b, 1, 0)
	case 0xc5, 0xda: // bin16, str16
		return skipSized(b, 2, 0)
	case 0xc6, 0xdb: // bin32, str32
		return skipSized(b, 4, 0)
	case 0xc7: // ext8: length, type byte, data
		return skipSized(b, 1, 1)
	case 0xc8:
		return skipSized(b, 2, 1)
	case 0xc9:
		return skipSized(b, 4, 1)
	case 0xdc: // array16
		n, b, err := readLen(b, 2)
		if err != nil {
			return nil, err
		}
		return skipElems(b, n, depth)
	case 0xdd: // array32
		n, b, err := readLen(b, 4)
		if err != nil {
			return nil, err
		}
		return skipElems(b, n, depth)
	case 0xde: // map16
		n, b, err := readLen(b, 2)
		if err != nil {
			return nil, err
		}
		return skipElems(b, 2*n, depth)
	case 0xdf: // map32
		n, b, err := readLen(b, 4)
		if err != nil {
			return nil, err
		}
		return skipElems(b, 2*n, depth)
	}
	return nil, errBadCode // 0xc1 is never used
}

// skipElems skips n values nested one level below depth. Each value takes at least one byte,
// so a count larger than the bytes left is a lie and is rejected before looping.
func skipElems(b []byte, n, depth int) ([]byte, error) {
	if n > len(b) {
		return nil, errTruncated
	}
	var err error
	for ; n > 0; n-- {
		if b, err = skipValue(b, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// skipSized skips a value stored as a size-byte length, extra header bytes, then the data.
func skipSized(b []byte, size, extra int) ([]byte, error) {
	n, b, err := readLen(b, size)
	if err != nil {
		return nil, err
	}
	return skipBytes(b, extra+n)
}

func skipBytes(b []byte, n int) ([]byte, error) {
	if n > len(b) {
		return nil, errTruncated
	}
	return b[n:], nil
}

// readLen reads a big-endian unsigned length of size 1, 2 or 4 bytes. Callers compare it with
// the bytes remaining before using it.
func readLen(b []byte, size int) (int, []byte, error) {
	if len(b) < size {
		return 0, nil, errTruncated
	}
	switch size {
	case 1:
		return int(b[0]), b[1:], nil
	case 2:
		return int(binary.BigEndian.Uint16(b)), b[2:], nil
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 0 { // only on 32-bit platforms; such a length can not fit in a frame anyway
		return 0, nil, errTruncated
	}
	return n, b[4:], nil
}

// --- decoding ---------------------------------------------------------------------------

// Interning bounds: member ids and group names are short and few, so after the first few
// messages every string a peer sends is already in the table and decoding allocates nothing.
// The bounds keep a peer that sends endless distinct strings from growing the table.
const (
	internMaxLen     = 64
	internMaxEntries = 256
)

// cursor reads msgpack values from a frame body that validate accepted. Its methods still
// check bounds (they return errTruncated rather than panic), so a bug in the validator can
// not turn into an out-of-range read. A cursor belongs to one goroutine.
type cursor struct {
	b      []byte
	intern map[string]string
}

func (c *cursor) reset(b []byte) { c.b = b }

func (c *cursor) next() (byte, error) {
	if len(c.b) == 0 {
		return 0, errTruncated
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v, nil
}

func (c *cursor) take(n int) ([]byte, error) {
	if n > len(c.b) {
		return nil, errTruncated
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v, nil
}

func (c *cursor) length(size int) (int, error) {
	n, rest, err := readLen(c.b, size)
	if err != nil {
		return 0, err
	}
	c.b = rest
	return n, nil
}

func (c *cursor) skip() error {
	rest, err := skipValue(c.b, 1)
	if err != nil {
		return err
	}
	c.b = rest
	return nil
}

// container reads an array (isMap false) or map header and returns its element count.
func (c *cursor) container(isMap bool) (int, error) {
	code, err := c.next()
	if err != nil {
		return 0, err
	}
	fix, c16, c32 := byte(0x90), byte(0xdc), byte(0xdd)
	if isMap {
		fix, c16, c32 = 0x80, 0xde, 0xdf
	}
	switch {
	case code&0xf0 == fix:
		return int(code & 0x0f), nil
	case code == c16:
		return c.length(2)
	case code == c32:
		return c.length(4)
	}
	return 0, errType
}

func (c *cursor) arrayLen() (int, error) { return c.container(false) }
func (c *cursor) mapLen() (int, error)   { return c.container(true) }

// raw reads a str or bin value and returns its bytes, which alias the frame. Both families
// are accepted, as the msgpack library does when it decodes into a string.
func (c *cursor) raw() ([]byte, bool, error) {
	code, err := c.next()
	if err != nil {
		return nil, false, err
	}
	var n int
	switch {
	case code == 0xc0:
		return nil, true, nil
	case code >= 0xa0 && code <= 0xbf:
		n = int(code & 0x1f)
	case code == 0xd9 || code == 0xc4:
		n, err = c.length(1)
	case code == 0xda || code == 0xc5:
		n, err = c.length(2)
	case code == 0xdb || code == 0xc6:
		n, err = c.length(4)
	default:
		return nil, false, errType
	}
	if err != nil {
		return nil, false, err
	}
	v, err := c.take(n)
	return v, false, err
}

// key reads a map key, which must be a string.
func (c *cursor) key() ([]byte, error) {
	k, isNil, err := c.raw()
	if err == nil && isNil {
		err = errType
	}
	return k, err
}

// str reads a string field; nil decodes as "" (as the msgpack library does).
func (c *cursor) str() (string, error) {
	v, _, err := c.raw()
	if err != nil || len(v) == 0 {
		return "", err
	}
	if s, ok := c.intern[string(v)]; ok { // the compiler does not allocate for this lookup
		return s, nil
	}
	s := string(v)
	if len(v) <= internMaxLen && len(c.intern) < internMaxEntries {
		if c.intern == nil {
			c.intern = make(map[string]string)
		}
		c.intern[s] = s
	}
	return s, nil
}

func (c *cursor) bool() (bool, error) {
	code, err := c.next()
	switch {
	case err != nil:
		return false, err
	case code == 0xc2 || code == 0xc0:
		return false, nil
	case code == 0xc3:
		return true, nil
	}
	return false, errType
}

// integer reads any msgpack integer (nil counts as 0). neg reports a negative value, whose
// magnitude is then in two's complement in u; floats are refused rather than truncated.
func (c *cursor) integer() (u uint64, neg bool, err error) {
	code, err := c.next()
	if err != nil {
		return 0, false, err
	}
	switch {
	case code <= 0x7f:
		return uint64(code), false, nil
	case code >= 0xe0:
		return uint64(int64(int8(code))), true, nil
	case code == 0xc0:
		return 0, false, nil
	}
	var size int
	switch code {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		return 0, false, errType
	}
	v, err := c.take(size)
	if err != nil {
		return 0, false, err
	}
	var x uint64
	switch size {
	case 1:
		x = uint64(v[0])
	case 2:
		x = uint64(binary.BigEndian.Uint16(v))
	case 4:
		x = uint64(binary.BigEndian.Uint32(v))
	default:
		x = binary.BigEndian.Uint64(v)
	}
	if code >= 0xd0 { // signed: sign-extend from size bytes
		shift := 64 - 8*uint(size)
		s := int64(x<<shift) >> shift
		return uint64(s), s < 0, nil
	}
	return x, false, nil
}

// int reads an integer that must fit in [lo, hi].
func (c *cursor) int(lo, hi int64) (int64, error) {
	u, neg, err := c.integer()
	if err != nil {
		return 0, err
	}
	if !neg && u > math.MaxInt64 {
		return 0, errRange
	}
	v := int64(u)
	if v < lo || v > hi {
		return 0, errRange
	}
	return v, nil
}

func (c *cursor) uint64() (uint64, error) {
	u, neg, err := c.integer()
	if err == nil && neg {
		err = errRange
	}
	return u, err
}

// fields calls fn once per key of a map, positioned on the key's value; fn must consume the
// value. fn does not escape, so a closure passed here costs no allocation.
func (c *cursor) fields(fn func(key []byte) error) error {
	n, err := c.mapLen()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		k, err := c.key()
		if err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}
