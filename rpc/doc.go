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
// type, so nothing is ever decoded into interface{}. The message is the protocol struct as
// github.com/vmihailenco/msgpack/v5 writes it: a map keyed by the structs' msgpack tags,
// Header inline, integers in their smallest form. Unknown map keys and extra trailing
// envelope elements are skipped, so a newer member can talk to an older one; a missing key
// reads as zero (the target struct is reset before every decode).
//
// # Codec: the library, behind a guard
//
// The msgpack library encodes and decodes every message (codec.go); the envelope is read and
// written with its low-level calls, the message with its struct codec. The library is not
// safe on untrusted bytes by itself: v5.4.1 allocates whatever a length header claims (issue
// 401: a 5-byte array header can make it allocate gigabytes). So every frame, request or
// response, is bounded before the library sees it: a length header of 0 or above
// MaxFrameSize (64 KiB by default) is refused before the body is read, and the body is then
// checked by a validator of our own (validate.go: every msgpack length header must fit in
// the bytes present, nesting is at most 8 deep, nothing may follow the envelope). After
// that the library can allocate at most in proportion to the frame. Envelope values are
// type- and range-checked (a negative id or a code beyond int32 is refused, not wrapped);
// inside the message the library's rules apply (a value of the wrong type is refused),
// except that an enumeration (VoteResult, Role, ResponseCode) outside the set this version
// knows reads as its UNKNOWN value rather than being narrowed: voteResult 257 would
// otherwise read as 1, ACCEPT (codec.go says why UNKNOWN and not a refused frame).
//
// Terms and ledger values are bounded too (protocol/limits.go): a message whose term is
// outside [0, MaxTerm], or whose ledger end term or index (or takeLeadershipLedgerIndex) is
// outside [-1, MaxLedgerValue], is a bad frame (ReasonOutOfRange), in either direction, so no
// arithmetic on them can wrap; the encoder refuses to send one (ErrOutOfRange), so only that
// call fails.
//
// A bad frame closes only the connection that sent it, is counted (Hooks.OnBadFrame, Stats)
// and is logged at a limited rate. A request for another group or member is not a bad
// frame: the Handler answers it with UNKNOWN_GROUP or UNKNOWN_MEMBER. An UNKNOWN_GROUP answer
// goes out as that code alone, whatever the Handler filled in, so a host outside the group
// learns nothing about it.
//
// # Peer authentication
//
// With Auth.Keys (the group key, package rpc/secure) every connection is authenticated and
// encrypted: the client's first frame body is the Noise msg1, the server answers msg2 as a
// frame, and every later body in both directions is sealed (ChaCha20-Poly1305 with a
// per-direction counter, plaintext + 16 bytes, at most secure.MaxMessageLen), so a frame is
// valid once, in order, on its own connection. The server bounds msg1 by
// secure.MaxHandshakeLen before buffering it, runs the handshake on the event loop, opens
// frames into a buffer of the connection's own, and seals replies under a per-connection
// mutex held across Seal and queueing in the connection's outbox, so they reach the wire in
// the order sealed; the
// client seals in its writer and opens in its reader. The handshake is bounded by the
// client's DialTimeout, and a connection counts as up (Connected) only once it is done.
//
// The member id a connection authenticated as is bound to it: a request whose localId
// differs closes the connection (ReasonWrongMember). Any error of package secure closes the
// connection too. Each refusal is counted (Hooks.OnAuthFailure, Stats.AuthFailures) with a
// reason (AuthFailureReasons: secure.Reason's labels, wrong_member, handshake_timeout, and on
// the client refused) and logged at a limited rate; it is not a bad frame. Auth.Insecure
// keeps the plaintext protocol; NewServer and NewClient refuse an Auth with neither.
//
// With Auth.PeerKeys instead (member keys: each member's own key pair and a trust list,
// secure.Identity) the handshake is version 3, three messages: the server answers msg1 with
// msg2 and reads msg3, which the client sends together with its first sealed frame; the
// server then checks the client's key against the trust list entry of the id it claimed,
// and the client checked the server's in msg2. So a member-key client learns of a refusal
// only when the server closes after msg3 (it may count as connected for that moment; nothing
// it sent is served). Every authenticated connection of a Server or Client is tracked by its
// PeerKeys until it closes: PeerKeys.Reload installs a new identity and closes, counted as
// secure.ReasonRevoked (or wrong_id, unknown_member), each connection whose peer key the new
// trust list no longer accepts; the others stay up.
//
// # Host links
//
// A host of many groups (a Server on a Mux) keeps one Client per peer host, shared by all its
// members (Auth.Host: handshake version 2, binding host ids; each member sends through a
// Caller with its own timeouts). The Mux's server accepts both versions: a request on a host
// link is served only from a member whose peers entry names the authenticated host
// (Mux.AddMember), and a request naming no group (the link's hello, a host heartbeat) only as
// that host itself. Host heartbeats (HOST_HEART_BEAT) carry the hosts' liveness frames; the
// Mux's host handler answers them (SetHostHandler), any other server UNSUPPORTED.
//
// # Connections stay up; strangers get 5 s
//
// A client that knows its group and id (Auth.Group, Auth.SelfID) sends a hello as the first
// frame of every connection, before anything queued: a METADATA request whose answer it
// drops. A follower's connections carry no requests while a leader lives; the hello is what
// keeps the server from closing them at FirstFrameTimeout and the client from redialling
// every few seconds (a vote sent during a redial would fail with ErrPeerDown and slow the
// failover). With keys it is also the proof the server waits for: a replayed msg1 gets a
// session, but only the holder of the session keys can send a frame that opens. So:
//   - A connection must complete its first frame within FirstFrameTimeout (5 s); with keys,
//     the handshake and its first sealed frame, strictly (a frame in progress does not extend
//     it), and missing it is counted as handshake_timeout.
//   - After that a connection is never closed for idleness (IdleTimeout, off by default, can
//     bound it). Members are few; MaxConnsPerIP and MaxConns bound the rest.
//
// # Server
//
// gnet event loops frame and decode; workers, started as requests wait (up to Workers) and
// leaving after a second idle, run the Handler (vote handling fsyncs, and a blocked loop
// would stall every connection on it) and queue the answer in the connection's outbox, which
// the loop writes in one write per batch. The exception is a heartbeat to a Handler that can
// answer it without waiting (InlineHeartBeater): the loop answers it into the outbox itself
// (written at the end of the read), and hands it to
// workers reserved for heartbeats when it can not, so a heartbeat never waits behind other
// requests and costs an idle follower no goroutine hand-off. Each connection may have MaxInflightPerConn requests queued or running; at the
// limit the server stops decoding that connection's frames until one finishes (gnet keeps
// buffering what arrives), and disconnects a peer whose backlog grows past a bound
// meanwhile. A frame must be complete within 5 s of its first bytes; a connection stuck
// mid-frame is closed (ReasonStalled), so half-sent frames can not hold MaxConns slots. A
// connection that completes no first frame within FirstFrameTimeout (5 s) is closed (see
// above). One source address may hold at most MaxConnsPerIP (32) connections,
// so one host can not lock the real peers out. Accepted sockets get TCP keep-alive and
// TCP_USER_TIMEOUT (sockopt.go), so a peer that vanished is dropped within about 10 s.
//
// # Client
//
// One connection per peer, dialled and redialled with backoff by a goroutine of its own; the
// backoff starts over only after a healthy connection (one that carried an answer or stayed
// up ReconnectMax; it is redialled at once), so a peer that accepts and drops connections is
// not redialled in a tight loop. Calls fail at once while the peer is down, time out after CallTimeout
// otherwise, and always complete exactly once. A response with an id that was never sent is
// a bad frame; a late answer to a call that timed out is dropped quietly.
//
// A connection that has gone silent (a call timed out and not a byte arrived for a whole
// CallTimeout) is dropped and redialled: across a partition that drops packets, TCP would
// otherwise hold it open and deliver our requests only at its next retransmission, seconds
// after the heal. A dial that times out (the network is down, the peer saw nothing) is
// retried after ReconnectMin without growing the backoff, so the peer is found again about
// DialTimeout (500 ms) after the heal whatever the partition's length. A slow peer that
// still answers keeps its connection. Dialled sockets get keep-alive and TCP_USER_TIMEOUT.
// When a server closes a connection that had answered, the client redials at once; a call
// made during that dial fails with ErrPeerDown, as any call while the peer is down. A
// handshake that fails (other than by timing out) is counted and backs off like a refused
// dial.
//
// # Where things are
//
// The per-request plumbing is one table, one entry per request code (method.go): the
// decoders, the server's workers and the client's calls go through it and never switch on
// the code. The server is split by who runs the code: server.go (options, start, stop),
// server_conn.go (a connection's bounds, timers and one close reason), server_frames.go (the
// event loop: framing, handshake, decoding), server_inline.go (heartbeats answered on the
// loop) and server_work.go (the workers). The client
// likewise: client.go (options, Send), client_call.go (a call from submit to completion and
// the timeout sweep), client_dial.go (dialling and backoff) and client_conn.go (a connection's
// writer and reader).
//
// # Allocations
//
// Each pooled frame buffer carries its own encoder, writing straight into the buffer, so
// encoding allocates nothing once warm; with keys, the frame is sealed in place in the same
// buffer, which also allocates nothing. Each server connection and each client connection
// reuses one decoder and reader, so decoding allocates only the strings the library copies
// out of the frame (a heartbeat's ids and group). A round trip also allocates the response
// handed to the caller and gnet's write request.
package rpc
