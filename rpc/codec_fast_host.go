package rpc

// Host heartbeats and their answers without the library's reflection (issue 29): a host's
// liveness frames carry lists of changes, thousands of them during a cold start, which the
// library encoded through its slow path (omitempty fields) and decoded field by field through
// reflection. The forms and the fallback are those of codec_fast.go and codec_fast_enc.go.

import (
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// wireHostHeartBeat appends the map of a host heartbeat or its answer: the Header, inc, seq,
// changes, then the omitempty fields that are not zero (upto; sent and from, requests only).
func wireHostHeartBeat(b []byte, h *protocol.Header, inc, seq uint64, changes []protocol.HostChange, opt ...uint64) []byte {
	n := byte(9)
	for _, v := range opt {
		if v != 0 {
			n++
		}
	}
	b = wireHeader(append(b, msgpcode.FixedMapLow|n), h)
	b = wireUint(wireStr(b, "inc"), inc)
	b = wireUint(wireStr(b, "seq"), seq)
	b = wireChanges(wireStr(b, "changes"), changes)
	for i, v := range opt {
		if v != 0 {
			b = wireUint(wireStr(b, hostOptKeys[i]), v)
		}
	}
	return b
}

var hostOptKeys = [...]string{"upto", "sent", "from"}

// wireChanges writes a list of changes as the library writes the slice: nil as nil, each
// change as the map g, m, e.
func wireChanges(b []byte, changes []protocol.HostChange) []byte {
	if changes == nil {
		return append(b, msgpcode.Nil)
	}
	b = wireArrayLen(b, len(changes))
	for i := range changes {
		c := &changes[i]
		b = wireStr(wireStr(append(b, msgpcode.FixedMapLow|3), "g"), c.Group)
		b = wireStr(wireStr(b, "m"), c.Member)
		b = wireUint(wireStr(b, "e"), c.Epoch)
	}
	return b
}

// wireArrayLen writes an array header as the library's EncodeArrayLen does.
func wireArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= 0xffff:
		return append(b, msgpcode.Array16, byte(n>>8), byte(n))
	}
	return append(b, msgpcode.Array32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// arrayLen reads an array header; -1: nil.
func (r *wireReader) arrayLen() (int, bool) {
	c, ok := r.next()
	switch {
	case !ok:
		return 0, false
	case c == msgpcode.Nil:
		return -1, true
	case msgpcode.IsFixedArray(c):
		return int(c & msgpcode.FixedArrayMask), true
	case c == msgpcode.Array16:
		return r.length(2)
	case c == msgpcode.Array32:
		return r.length(4)
	}
	return 0, false
}

// changes reads a list of changes as the library decodes the slice: nil for nil, an empty
// list for an empty array. A list longer than MaxHostChanges is left to the library (and
// refused by the bounds check after it); validate has bounded the length by the bytes present.
func (r *wireReader) changes() ([]protocol.HostChange, bool) {
	n, ok := r.arrayLen()
	switch {
	case !ok || n > protocol.MaxHostChanges:
		return nil, false
	case n < 0:
		return nil, true
	}
	cs := make([]protocol.HostChange, n)
	for i := range cs {
		if !r.change(&cs[i]) {
			return nil, false
		}
	}
	return cs, true
}

// changesOnce reads a host heartbeat's or answer's changes into *cs, as a field reader's
// (known, ok). A repeated key goes to the library (known false), which decodes the second list
// into the first one's elements: a fresh list would read differently.
func (r *wireReader) changesOnce(cs *[]protocol.HostChange) (known, ok bool) {
	if *cs != nil {
		return false, false
	}
	*cs, ok = r.changes()
	return true, ok
}

func (r *wireReader) change(c *protocol.HostChange) bool {
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	for i := 0; i < n; i++ {
		k, ok := r.key()
		if !ok {
			return false
		}
		switch string(k) {
		case "g":
			c.Group, ok = r.str(false)
		case "m":
			c.Member, ok = r.str(true)
		case "e":
			c.Epoch, ok = r.uint()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func fastHostHeartBeatRequest(r *wireReader, m *protocol.HostHeartBeatRequest) bool {
	return readFields(r, &m.Header, m, fieldHostHeartBeatRequest)
}

func fieldHostHeartBeatRequest(r *wireReader, k []byte, m *protocol.HostHeartBeatRequest) (known, ok bool) {
	switch string(k) {
	case "inc":
		m.Incarnation, ok = r.uint()
	case "seq":
		m.Seq, ok = r.uint()
	case "changes":
		return r.changesOnce(&m.Changes)
	case "upto":
		m.Upto, ok = r.uint()
	case "sent":
		m.Sent, ok = r.uint()
	case "from":
		m.From, ok = r.uint()
	default:
		return false, false
	}
	return true, ok
}

func fastHostHeartBeatResponse(r *wireReader, m *protocol.HostHeartBeatResponse) bool {
	return readFields(r, &m.Header, m, fieldHostHeartBeatResponse)
}

func fieldHostHeartBeatResponse(r *wireReader, k []byte, m *protocol.HostHeartBeatResponse) (known, ok bool) {
	switch string(k) {
	case "inc":
		m.Incarnation, ok = r.uint()
	case "seq":
		m.Seq, ok = r.uint()
	case "changes":
		return r.changesOnce(&m.Changes)
	case "upto":
		m.Upto, ok = r.uint()
	default:
		return false, false
	}
	return true, ok
}
