// Package secure authenticates and encrypts rpc connections between the members of a group
// that share a secret key. It is pure computation: no sockets, goroutines or clock. The rpc
// layer passes in the bytes that arrived and sends the bytes it gets back, so the package fits
// gnet's message-driven event loop as well as the client's blocking net.Conn.
//
// # Construction
//
// The handshake is the Noise protocol Noise_NNpsk0_25519_ChaChaPoly_SHA256
// (https://noiseprotocol.org, implemented by github.com/flynn/noise), with the group key as
// the pre-shared key. The prologue, which both sides mix into the handshake hash, is
// "dledger-peer-auth/1" NUL group: a member of another group, or of another version of this
// protocol, fails the handshake even if it holds the same key.
//
//	msg1  initiator -> responder   version byte 0x01 | e | AEAD(initiator id, target id)
//	msg2  responder -> initiator   e, ee | AEAD(responder id)
//
// Each is carried in one rpc frame (the 4-byte length, then the message as the body). The
// responder accepts msg1 only if it is addressed to it and the accept callback knows the
// initiator's id; the initiator accepts msg2 only from the member it dialled. After the
// handshake each side holds a send and a receive key, and every later frame body is
// ChaCha20-Poly1305 with the implicit 64-bit counter of Noise's transport phase (Session).
//
// A host of many groups keeps one connection per peer host instead (NewLinkInitiator,
// RespondLink: version 2, link.go): the same pattern and key set, with the prologue
// "dledger-host-link/2" NUL and the two host ids in place of the group and member ids, so the
// responder's work does not grow with the groups it serves.
//
// SHA256 rather than BLAKE2s: the hash runs only during the handshake (a few dozen calls, next
// to two X25519 operations that cost far more), so BLAKE2s's speed on CPUs without SHA
// instructions does not matter, and crypto/sha256 is the standard library's (maintained with
// Go, FIPS-validated module). ChaCha20-Poly1305 rather than AES-GCM: constant time in software
// on every CPU, and the cipher of WireGuard and of Noise's common profiles.
//
// # What it protects against
//
// Without the key nobody can open a connection, read or forge a frame. The counter makes a
// frame valid exactly once, in order, on its own connection: a replayed, reordered, dropped or
// altered frame fails to open, and a failed open is fatal for the connection. A replayed msg1
// gets a msg2 back, but the responder's fresh ephemeral key means the replayer can not derive
// the session keys, so nothing it sends afterwards opens. The ephemeral keys also give forward
// secrecy against a passive recorder: a key stolen later does not decrypt past traffic.
//
// What it does not: with a group key every member holds the same key, so a member (or a
// thief of its key file) can claim any member id. The id is bound to the connection (the rpc
// layer must check that every request's localId matches Session.PeerID), but not to a
// per-member secret. Traffic analysis (frame sizes and timing) and denial of service by
// whoever can reach the port are out of scope; the rpc layer bounds connections.
//
// # Member keys (version 3)
//
// Per-member static key pairs close that gap (xx.go, static.go, trust.go): each member holds
// its own X25519 key pair (StaticKey, LoadStaticKeyFile), and a trust list (Trust,
// LoadTrustFile) names the public keys each member id may use. The handshake is
// Noise_XX_25519_ChaChaPoly_SHA256 (NewStaticInitiator, RespondStatic), three messages, the
// third sent with the dialler's first sealed frame; each side checks the other's static key
// against the trust list entry of the id it claims (Identity.Check). A stolen key file then
// speaks for its own member only, and a member is revoked alone by dropping its key from the
// trust lists: Identity.Next remembers the dropped keys, and the rpc layer closes the live
// sessions whose PeerKey the new identity no longer accepts. The same handshake with an empty
// group authenticates a host link between two hosts, each by its host key.
//
// # Failures
//
// Every error wraps one of the sentinel errors, and Reason maps it to a short label for a
// metric. To a responder a wrong key, a wrong group and a tampered msg1 look the same (the
// first AEAD tag does not verify): all three are ErrBadKey, reason "bad_key".
//
// # Key rotation without downtime
//
// A KeySet holds a primary key, used to dial, and up to MaxKeys-1 more accepted keys; the
// responder tries each (a fresh handshake state per try) on msg1. In a key file the first key
// is the primary. To replace key OLD with NEW, finish each step on every member (one member
// at a time, so the group keeps its quorum) before starting the next:
//
//  1. Add NEW as a second line everywhere (OLD stays primary): every member accepts both.
//  2. Swap the lines everywhere (NEW primary, OLD accepted): members dial with NEW, which all
//     of them accept since step 1, and still accept OLD from members not yet swapped.
//  3. Remove OLD everywhere, once no session uses it (Session.KeyID names the key a
//     connection used).
package secure
