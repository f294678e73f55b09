package rpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// lengthWidth returns how many bytes of length follow type code c (0 for codes whose size
// is fixed or held in the code itself), and whether an ext type byte follows the length.
func lengthWidth(c byte) (width int, ext bool) {
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		return 1, false
	case 0xc5, 0xda, 0xdc, 0xde: // bin16, str16, array16, map16
		return 2, false
	case 0xc6, 0xdb, 0xdd, 0xdf: // bin32, str32, array32, map32
		return 4, false
	case 0xc7: // ext8
		return 1, true
	case 0xc8: // ext16
		return 2, true
	case 0xc9: // ext32
		return 4, true
	}
	return 0, false
}

// honestValue builds one complete msgpack value with type code c, written from the spec.
// For a code with a length field the length is n: n bytes of data, n elements (fixint 1) or
// n pairs (fixint keys and values). Codes that carry their size ignore n.
func honestValue(c byte, n int) []byte {
	b := []byte{c}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixints, nil, bools
		return b
	case c <= 0x8f: // fixmap
		return append(b, bytes.Repeat([]byte{0xa1, 'k', 0x01}, int(c&0x0f))...)
	case c <= 0x9f: // fixarray
		return append(b, bytes.Repeat([]byte{0x01}, int(c&0x0f))...)
	case c <= 0xbf: // fixstr
		return append(b, bytes.Repeat([]byte{'x'}, int(c&0x1f))...)
	}
	switch c {
	case 0xcc, 0xd0: // uint8, int8
		return append(b, 1)
	case 0xcd, 0xd1: // uint16, int16
		return append(b, 1, 2)
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return append(b, 1, 2, 3, 4)
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return append(b, 1, 2, 3, 4, 5, 6, 7, 8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16: type byte, data
		return append(append(b, 5), bytes.Repeat([]byte{9}, 1<<(c-0xd4))...)
	}
	width, ext := lengthWidth(c)
	switch width {
	case 1:
		b = append(b, byte(n))
	case 2:
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	case 4:
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	default:
		panic(fmt.Sprintf("honestValue: code %#x", c))
	}
	if ext {
		b = append(b, 5)
	}
	switch c {
	case 0xdc, 0xdd: // arrays
		return append(b, bytes.Repeat([]byte{0x01}, n)...)
	case 0xde, 0xdf: // maps
		return append(b, bytes.Repeat([]byte{0x01, 0x02}, n)...)
	}
	return append(b, bytes.Repeat([]byte{'x'}, n)...)
}

// TestValidateEveryTypeCode walks every msgpack type code at each header width (fixint,
// fixmap, fixarray, fixstr, nil, bools, bin8/16/32, ext8/16/32, floats, ints, fixext1-16,
// str8/16/32, array16/32, map16/32) and checks the validator against the spec and the
// library: an honest value is accepted and is exactly as long as the library's Skip says;
// every shorter prefix is refused; a trailing byte is refused; and a length field at its
// maximum with a few bytes behind it is refused (the lie that makes the library allocate).
func TestValidateEveryTypeCode(t *testing.T) {
	for code := 0; code <= 0xff; code++ {
		c := byte(code)
		if c == 0xc1 { // never used
			if err := validate([]byte{c}); err == nil {
				t.Errorf("0xc1 accepted")
			}
			continue
		}
		width, _ := lengthWidth(c)
		lengths := []int{0}
		switch width {
		case 1:
			lengths = []int{0, 1, 31, 255}
		case 2:
			lengths = []int{0, 1, 300, 65535}
		case 4:
			lengths = []int{0, 1, 300, 70000}
		}
		for _, n := range lengths {
			v := honestValue(c, n)
			name := fmt.Sprintf("code %#x length %d", c, n)
			if err := validate(v); err != nil {
				t.Errorf("%s: honest value refused: %v", name, err)
				continue
			}
			r := bytes.NewReader(v)
			if err := msgpack.NewDecoder(r).Skip(); err != nil || r.Len() != 0 {
				t.Errorf("%s: the library skips %d of %d bytes (%v)", name, len(v)-r.Len(), len(v), err)
			}
			for _, cut := range prefixCuts(len(v)) {
				if err := validate(v[:cut]); err == nil {
					t.Errorf("%s: prefix of %d of %d bytes accepted", name, cut, len(v))
				}
			}
			if err := validate(append(v[:len(v):len(v)], 0x00)); err == nil {
				t.Errorf("%s: trailing byte accepted", name)
			}
		}
		if width > 0 {
			lie := append([]byte{c}, bytes.Repeat([]byte{0xff}, width)...)
			lie = append(lie, 5, 1, 2, 3) // an ext type byte or data, far short of the claim
			if err := validate(lie); err == nil {
				t.Errorf("code %#x: maximal length with 4 bytes behind it accepted: % x", c, lie)
			}
		}
	}
}

// prefixCuts lists the prefix lengths to try for a value of n bytes: all of them for a small
// value; for a large one, the header region, the middle and the end (checking every cut of a
// 140 KB value would take minutes and find nothing new).
func prefixCuts(n int) []int {
	if n <= 512 {
		cuts := make([]int, n)
		for i := range cuts {
			cuts[i] = i
		}
		return cuts
	}
	cuts := []int{n / 2, n - 2, n - 1}
	for i := 0; i < 16; i++ {
		cuts = append(cuts, i)
	}
	return cuts
}

// TestValidateDepthBoundary: maxDepth levels of nesting are accepted, one more is refused.
func TestValidateDepthBoundary(t *testing.T) {
	deepest := append(bytes.Repeat([]byte{0x91}, maxDepth-1), 0x90) // maxDepth arrays
	if err := validate(deepest); err != nil {
		t.Fatalf("%d levels refused: %v", maxDepth, err)
	}
	tooDeep := append(bytes.Repeat([]byte{0x91}, maxDepth), 0x90)
	if err := validate(tooDeep); err != errTooDeep {
		t.Fatalf("%d levels: %v, want errTooDeep", maxDepth+1, err)
	}
}
