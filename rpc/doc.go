// Package rpc carries the election protocol between members: the framing and msgpack
// encoding of the messages in rpc/protocol, a server on gnet that hands requests to a
// Handler (the elector), and a client that implements the elector's Transport.
//
// # Wire format
//
// A frame is a 4-byte big-endian body length followed by the body, a msgpack array
//
//	[id uint64, code int32, response bool, message map, ...]
//
// id matches a response to its request; code is DLedger's request code (METADATA 50000,
// VOTE 51001, HEART_BEAT 51002, LEADERSHIP_TRANSFER 51005) and selects the concrete message
// type, so nothing is ever decoded into interface{}. The message is a map keyed by the
// protocol structs' msgpack tags. Unknown map keys and extra trailing envelope elements are
// skipped, so a newer member can talk to an older one; a missing key reads as zero.
//
// # Untrusted input
//
// Every frame, request or response, is bounded before it is decoded: a length header of 0
// or above MaxFrameSize (64 KiB by default) is refused before the body is read, and the body
// is validated (every msgpack length header must fit in the bytes present, nesting is at most
// 8 deep, nothing may follow the envelope) before any field is read. Decoding never allocates
// according to a length the peer claims, which is what makes the msgpack library unsafe here
// (issue 401: a 5-byte array header can make it allocate gigabytes). A bad frame closes only
// the connection that sent it, is counted (Hooks.OnBadFrame, Stats) and is logged at a
// limited rate. A request for another group or member is not a bad frame: the Handler answers
// it with UNKNOWN_GROUP or UNKNOWN_MEMBER.
//
// # Server
//
// gnet event loops only frame and decode; a fixed pool of workers runs the Handler (vote
// handling fsyncs, and a blocked loop would stall every connection on it) and replies with
// AsyncWrite. Each connection may have MaxInflightPerConn requests queued or running; at the
// limit the server stops reading that connection until one finishes, and disconnects a peer
// that keeps sending meanwhile.
//
// # Client
//
// One connection per peer, dialled and redialled with backoff by a goroutine of its own.
// Calls fail at once while the peer is down, time out after CallTimeout otherwise, and
// always complete exactly once.
//
// # Allocations
//
// Encoding appends to pooled buffers and decoding interns the few short strings members
// send (ids, group), so encoding and decoding a heartbeat allocate nothing once warm; a round
// trip allocates the response handed to the caller and gnet's write request.
package rpc
