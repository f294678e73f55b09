package rpc

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Hand-built msgpack for the tests: a reference written from the msgpack spec, independent
// of the library, so the tests can check the production codec (the library) against exact
// bytes, and build frames the production encoder would never write (hostile, future, or in
// another implementation's integer forms).

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

// envelopeHead is the start of a frame body, up to the message.
func envelopeHead(id uint64, code protocol.RequestCode, resp bool) []byte {
	b := appendArrayLen(nil, envelopeLen)
	b = appendUint(b, id)
	b = appendInt(b, int64(code))
	return appendBool(b, resp)
}

// handMessage encodes a protocol message struct (a pointer) as a map of its msgpack tag keys
// in field order, the inline Header's fields first, integers in their smallest form: the
// format the production encoder must write.
func handMessage(m any) []byte {
	var keys []string
	var vals []reflect.Value
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("msgpack"), ",")
			if opts == "inline" {
				walk(v.Field(i))
				continue
			}
			if opts == "omitempty" && v.Field(i).IsZero() {
				continue // the encoder leaves it out
			}
			keys = append(keys, name)
			vals = append(vals, v.Field(i))
		}
	}
	walk(reflect.ValueOf(m).Elem())
	b := appendMapLen(nil, len(keys))
	for i, k := range keys {
		b = appendStr(b, k)
		switch v := vals[i]; v.Kind() {
		case reflect.String:
			b = appendStr(b, v.String())
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			b = appendInt(b, v.Int())
		case reflect.Uint64:
			b = appendUint(b, v.Uint())
		case reflect.Bool:
			b = appendBool(b, v.Bool())
		case reflect.Pointer: // a nested message (issue 31's configurations), as a map
			b = append(b, handMessage(v.Interface())...)
		default:
			panic("handMessage: unhandled kind " + v.Kind().String())
		}
	}
	return b
}

// messageOf returns the message bytes of a valid frame body (the envelope's fourth element).
func messageOf(body []byte) []byte {
	rest := body[1:] // the envelope's array header, a fixarray
	for i := 0; i < 3; i++ {
		var err error
		if rest, err = skipValue(rest, 2); err != nil {
			panic(err)
		}
	}
	end, err := skipValue(rest, 2)
	if err != nil {
		panic(err)
	}
	return rest[:len(rest)-len(end)]
}
