package rpc

import (
	"encoding/binary"
	"errors"
)

// The validator is the guard in front of the msgpack library. It is not a codec: it only
// walks the bytes of a frame body and checks that they are safe to hand to the library.
//
// Why it is needed: msgpack v5.4.1 allocates whatever a length header claims (upstream issue
// 401: its alloc-limit check is broken, so five bytes can ask for gigabytes). Once every
// length header is known to fit in the bytes actually present and nesting is bounded, the
// library can allocate at most in proportion to the frame, which MaxFrameSize bounds.

// maxDepth bounds nesting in a frame. Our envelope is an array holding a flat map (depth 2);
// the slack lets a newer peer add a small structured field that we skip.
const maxDepth = 8

// Errors from the validator. They all mean "this peer sent a bad frame".
var (
	errTruncated = errors.New("msgpack: value runs past the end of the frame")
	errTooDeep   = errors.New("msgpack: nesting too deep")
	errBadCode   = errors.New("msgpack: invalid type code")
	errTrailing  = errors.New("msgpack: trailing bytes after the envelope")
)

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
	if n, ok := fixedSize(c); ok {
		return skipBytes(b, n)
	}
	if size, extra, ok := sizedHeader(c); ok {
		return skipSized(b, size, extra)
	}
	return skipContainer(b, c, depth)
}

// fixedSize is the number of bytes after type code c (0xc0-0xdf) of a value of fixed size.
func fixedSize(c byte) (int, bool) {
	switch c {
	case 0xcc, 0xd0: // uint8, int8
		return 1, true
	case 0xcd, 0xd1: // uint16, int16
		return 2, true
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return 4, true
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return 8, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16: a type byte and the data
		return 1 + 1<<(c-0xd4), true
	}
	return 0, false
}

// sizedHeader describes a value stored as a length of size bytes, extra header bytes, then
// the data (strings, binaries, extensions).
func sizedHeader(c byte) (size, extra int, ok bool) {
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		return 1, 0, true
	case 0xc5, 0xda: // bin16, str16
		return 2, 0, true
	case 0xc6, 0xdb: // bin32, str32
		return 4, 0, true
	case 0xc7: // ext8: length, type byte, data
		return 1, 1, true
	case 0xc8:
		return 2, 1, true
	case 0xc9:
		return 4, 1, true
	}
	return 0, 0, false
}

// skipContainer skips an array or map with a 2- or 4-byte element count; any other code left
// is invalid (0xc1 is never used).
func skipContainer(b []byte, c byte, depth int) ([]byte, error) {
	var size, per int // bytes of the count, values per element
	switch c {
	case 0xdc: // array16
		size, per = 2, 1
	case 0xdd: // array32
		size, per = 4, 1
	case 0xde: // map16
		size, per = 2, 2
	case 0xdf: // map32
		size, per = 4, 2
	default:
		return nil, errBadCode
	}
	n, b, err := readLen(b, size)
	if err != nil {
		return nil, err
	}
	return skipElems(b, per*n, depth)
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
