package rpc

// The common messages are encoded without the library's reflection too (issue 29; the
// decoding side is codec_fast.go): the plain forms of votes, heartbeats and their answers,
// written field by field in the bytes the library writes for the same struct (its map of the
// struct's fields in their order, the Header's first, compact integers, the shortest string
// header), which TestFastEncodeWritesAsTheLibrary checks. Every other form is the library's.

import (
	"encoding/binary"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// fastEncode appends msg's map to b if msg is in a form the fast encoder writes; ok false:
// b is unchanged and the library encodes it.
func fastEncode(b []byte, msg any) ([]byte, bool) {
	switch r := msg.(type) {
	case *protocol.VoteRequest:
		if r.ConfEpoch != 0 || r.ConfTerm != 0 || r.Probe {
			return b, false
		}
		b = wireHeader(append(b, msgpcode.FixedMapLow|8), &r.Header)
		b = wireInt(wireStr(b, "ledgerEndTerm"), r.LedgerEndTerm)
		return wireInt(wireStr(b, "ledgerEndIndex"), r.LedgerEndIndex), true
	case *protocol.VoteResponse:
		if r.ConfEpoch != 0 || r.ConfTerm != 0 || r.Conf != nil || r.Pending != nil {
			return b, false
		}
		b = wireHeader(append(b, msgpcode.FixedMapLow|7), &r.Header)
		return wireInt(wireStr(b, "voteResult"), int64(r.VoteResult)), true
	case *protocol.HeartBeatRequest:
		return fastHeartBeatRequestEnc(b, r)
	case *protocol.HeartBeatResponse:
		return fastHeartBeatResponseEnc(b, r)
	case *protocol.HostHeartBeatRequest:
		return wireHostHeartBeat(b, &r.Header, r.Incarnation, r.Seq, r.Changes, r.Upto, r.Sent, r.From), true
	case *protocol.HostHeartBeatResponse:
		return wireHostHeartBeat(b, &r.Header, r.Incarnation, r.Seq, r.Changes, r.Upto), true
	}
	return b, false
}

// fastHeartBeatRequestEnc writes heartBeatRequestPlain and heartBeatRequestEpoch
// (heartBeatRequestWire's choice for a heartbeat with no configuration version).
func fastHeartBeatRequestEnc(b []byte, r *protocol.HeartBeatRequest) ([]byte, bool) {
	if r.Conf != nil || r.Pending != nil || r.ConfEpoch != 0 || r.ConfTerm != 0 {
		return b, false
	}
	n := byte(7)
	if r.Epoch != 0 {
		n = 8
	}
	b = wireHeader(append(b, msgpcode.FixedMapLow|n), &r.Header)
	b = wireStr(wireStr(b, "successors"), r.Successors)
	if r.Epoch != 0 {
		b = wireUint(wireStr(b, "epoch"), r.Epoch)
	}
	return b, true
}

// fastHeartBeatResponseEnc writes heartBeatResponseKnown and heartBeatResponseKnownEpoch
// (heartBeatResponseWire's choice for a member that knows its ledger and reports no
// configuration version).
func fastHeartBeatResponseEnc(b []byte, r *protocol.HeartBeatResponse) ([]byte, bool) {
	if r.LedgerUnknown || r.ConfEpoch != 0 || r.ConfTerm != 0 || r.CommitEpoch != 0 || r.CommitTerm != 0 {
		return b, false
	}
	n := byte(8)
	if r.Epoch != 0 {
		n = 9
	}
	b = wireHeader(append(b, msgpcode.FixedMapLow|n), &r.Header)
	b = wireInt(wireStr(b, "ledgerEndTerm"), r.LedgerEndTerm)
	b = wireInt(wireStr(b, "ledgerEndIndex"), r.LedgerEndIndex)
	if r.Epoch != 0 {
		b = wireUint(wireStr(b, "epoch"), r.Epoch)
	}
	return b, true
}

// wireHeader writes the Header's six fields, keys and values.
func wireHeader(b []byte, h *protocol.Header) []byte {
	b = wireStr(wireStr(b, "group"), h.Group)
	b = wireStr(wireStr(b, "remoteId"), h.RemoteID)
	b = wireStr(wireStr(b, "localId"), h.LocalID)
	b = wireStr(wireStr(b, "leaderId"), h.LeaderID)
	b = wireInt(wireStr(b, "term"), h.Term)
	return wireInt(wireStr(b, "code"), int64(h.Code))
}

// wireStr writes a string as the library's EncodeString does.
func wireStr(b []byte, s string) []byte {
	switch l := len(s); {
	case l < 32:
		b = append(b, msgpcode.FixedStrLow|byte(l))
	case l < 256:
		b = append(b, msgpcode.Str8, byte(l))
	case l <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, msgpcode.Str16), uint16(l))
	default:
		b = binary.BigEndian.AppendUint32(append(b, msgpcode.Str32), uint32(l))
	}
	return append(b, s...)
}

// wireUint and wireInt write integers as the library's EncodeUint and EncodeInt do (the
// compact forms, UseCompactInts).
func wireUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, msgpcode.Uint8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Uint16), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Uint32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, msgpcode.Uint64), n)
}

func wireInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return wireUint(b, uint64(n))
	case n >= int64(int8(msgpcode.NegFixedNumLow)):
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, msgpcode.Int8, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Int16), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Int32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, msgpcode.Int64), uint64(n))
}
