package secure

import (
	"fmt"

	"github.com/flynn/noise"
)

// suite is Noise's 25519_ChaChaPoly_SHA256 (the package comment says why SHA256).
var suite = noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashSHA256)

// newHandshake starts one side of NNpsk0 with key as the pre-shared key.
func newHandshake(key *[KeySize]byte, group string, initiator bool) (*noise.HandshakeState, error) {
	return noise.NewHandshakeState(noise.Config{
		CipherSuite:           suite,
		Pattern:               noise.HandshakeNN,
		Initiator:             initiator,
		Prologue:              []byte(protocolPrologue + group),
		PresharedKey:          key[:],
		PresharedKeyPlacement: 0,
	})
}

// Initiator is the dialling side of a handshake in progress. It is used once: Finish
// consumes it whether or not it succeeds.
type Initiator struct {
	hs       *noise.HandshakeState
	remoteID string
	keyID    string
}

// NewInitiator starts a handshake with member remoteID using keys' primary key, and returns
// msg1 to send as the connection's first frame body. The error is a configuration error (no
// key, an empty or oversized name), never a network one.
func NewInitiator(keys KeySet, group, selfID, remoteID string) (*Initiator, []byte, error) {
	if keys.Len() == 0 {
		return nil, nil, fmt.Errorf("secure: no key")
	}
	if err := checkNames(group, selfID); err != nil {
		return nil, nil, err
	}
	if err := checkName("member id", remoteID, MaxIDLen); err != nil {
		return nil, nil, err
	}
	key := keys.Primary()
	hs, err := newHandshake(&key, group, true)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	payload := make([]byte, 0, 2+len(selfID)+len(remoteID))
	payload = appendID(payload, selfID)
	payload = appendID(payload, remoteID)
	msg1, _, _, err := hs.WriteMessage([]byte{Version}, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err) // only a failing random source
	}
	return &Initiator{hs: hs, remoteID: remoteID, keyID: KeyID(key)}, msg1, nil
}

// Finish reads the responder's msg2 and returns the session. It fails if msg2 does not
// verify (ErrBadKey), does not parse (ErrMalformed), or names a member other than the one
// dialled (ErrWrongPeer). Any call after the first fails.
func (in *Initiator) Finish(msg2 []byte) (*Session, error) {
	hs := in.hs
	if hs == nil {
		return nil, fmt.Errorf("%w: handshake already finished", ErrMalformed)
	}
	in.hs = nil
	if len(msg2) < msg2MinLen || len(msg2) > msg2MaxLen {
		return nil, fmt.Errorf("%w: msg2 of %d bytes", ErrMalformed, len(msg2))
	}
	payload, cs1, cs2, err := hs.ReadMessage(nil, msg2)
	if err != nil || cs1 == nil {
		return nil, ErrBadKey
	}
	id, rest, ok := readID(payload)
	if !ok || len(rest) != 0 {
		return nil, fmt.Errorf("%w: msg2 payload", ErrMalformed)
	}
	if id != in.remoteID {
		return nil, fmt.Errorf("%w: dialled %q, answered by %q", ErrWrongPeer, in.remoteID, id)
	}
	return newSession(id, in.keyID, cs1, cs2), nil // the initiator sends with the first
}

// Respond reads msg1, the first frame body of an accepted connection, and returns msg2 to
// send back, the session, and the id the peer claims. Every key in keys is tried, each with
// a fresh handshake state. The handshake is refused if no key verifies msg1 (ErrBadKey),
// msg1 is addressed to another member (ErrWrongPeer), or accept, called with the peer's id,
// returns false (ErrUnknownMember; a nil accept refuses everyone). peerID is set whenever
// msg1 verified, for the log line of a refusal.
//
// The peer has proven it holds the key once its first frame opens: a replayed msg1 also
// produces a msg2 and a session, but no frame will open on it.
func Respond(keys KeySet, group, selfID string, msg1 []byte, accept func(peerID string) bool) (msg2 []byte, s *Session, peerID string, err error) {
	if err := checkNames(group, selfID); err != nil {
		return nil, nil, "", err
	}
	one := func(yield func(string) bool) { yield(group) }
	msg2, s, _, peerID, _, err = RespondHost(keys, one, msg1, func(_, peer, target string) error {
		if target != selfID {
			return fmt.Errorf("%w: %q dialled %q, this is %q", ErrWrongPeer, peer, target, selfID)
		}
		if accept == nil || !accept(peer) {
			return fmt.Errorf("%w: %q", ErrUnknownMember, peer)
		}
		return nil
	})
	return msg2, s, peerID, err
}

// RespondHost is Respond for a host that serves members of many groups on one listener
// (docs/protocol.md 4.1, "A host of groups"): msg1's prologue binds a group the responder has
// to guess, so every group groups yields is tried with every key until one verifies msg1.
// msg1 of NNpsk0 carries no DH, so a try is a hash and an AEAD open, but the cost is linear in
// the groups. check, called with the group, the peer's id and the member it dialled, accepts
// the connection (nil) or refuses it (an error wrapping ErrWrongPeer or ErrUnknownMember). The
// responder answers as the member dialled. The bytes on the wire are Respond's.
func RespondHost(keys KeySet, groups func(yield func(string) bool), msg1 []byte,
	check func(group, peerID, target string) error) (msg2 []byte, s *Session, group, peerID, target string, err error) {
	if keys.Len() == 0 {
		return nil, nil, "", "", "", fmt.Errorf("secure: no key")
	}
	if err := checkMsg1(msg1); err != nil {
		return nil, nil, "", "", "", err
	}
	var hs *noise.HandshakeState
	var payload []byte
	var keyID string
	err = ErrBadKey
	for g := range groups {
		if checkName("group", g, MaxGroupLen) != nil {
			continue
		}
		if hs, payload, keyID, err = readMsg1(keys, g, msg1); err != ErrBadKey {
			group = g
			break
		}
	}
	if err != nil {
		return nil, nil, "", "", "", err
	}
	peerID, target, err = msg1Payload(payload)
	if err != nil {
		return nil, nil, group, "", "", err
	}
	if err := check(group, peerID, target); err != nil {
		return nil, nil, group, peerID, target, err
	}
	msg2, cs1, cs2, err := hs.WriteMessage(make([]byte, 0, msg2MaxLen), appendID(nil, target))
	if err != nil || cs1 == nil {
		return nil, nil, group, peerID, target, fmt.Errorf("secure: %w", err) // only a failing random source
	}
	return msg2, newSession(peerID, keyID, cs2, cs1), group, peerID, target, nil // the responder sends with the second
}

// readMsg1 tries msg1 with every key, each with a fresh handshake state, and returns the
// state and payload of the key that verifies it (ErrBadKey if none does).
func readMsg1(keys KeySet, group string, msg1 []byte) (*noise.HandshakeState, []byte, string, error) {
	for i := range keys.keys {
		try, err := newHandshake(&keys.keys[i], group, false)
		if err != nil {
			return nil, nil, "", fmt.Errorf("secure: %w", err)
		}
		if p, _, _, err := try.ReadMessage(nil, msg1[1:]); err == nil {
			return try, p, KeyID(keys.keys[i]), nil
		}
	}
	return nil, nil, "", ErrBadKey
}

// msg1Payload reads msg1's payload: the initiator's id and the id it dialled.
func msg1Payload(payload []byte) (peerID, target string, err error) {
	peerID, rest, ok := readID(payload)
	target, rest, ok2 := readID(rest)
	if !ok || !ok2 || len(rest) != 0 {
		return "", "", fmt.Errorf("%w: msg1 payload", ErrMalformed)
	}
	return peerID, target, nil
}

// checkMsg1 bounds msg1 and reads its version byte before any cryptography. An
// unauthenticated rpc frame starts with a msgpack array header (the envelope), which tells a
// member without a key from a garbled handshake.
func checkMsg1(msg1 []byte) error { return checkMsg1Version(msg1, Version) }

// checkMsg1Version is checkMsg1 for a responder of version want: any other version below
// 0x10 is ErrVersion (a host link's msg1 to a member of version 1, or the reverse).
func checkMsg1Version(msg1 []byte, want byte) error {
	if len(msg1) == 0 {
		return fmt.Errorf("%w: empty msg1", ErrMalformed)
	}
	switch v := msg1[0]; {
	case v == want:
	case v >= 0x90 && v <= 0x9f, v == 0xdc, v == 0xdd: // msgpack fixarray, array16, array32
		return ErrPlaintext
	case v >= Version && v < 0x10:
		return fmt.Errorf("%w: %d", ErrVersion, v)
	default:
		return fmt.Errorf("%w: msg1 starts with %#x", ErrMalformed, v)
	}
	lo, hi := msg1MinLen, msg1MaxLen
	if want == VersionStatic {
		lo, hi = staticMsg1MinLen, staticMsg1MaxLen
	}
	if len(msg1) < lo || len(msg1) > hi {
		return fmt.Errorf("%w: msg1 of %d bytes", ErrMalformed, len(msg1))
	}
	return nil
}

func checkNames(group, selfID string) error {
	if err := checkName("group", group, MaxGroupLen); err != nil {
		return err
	}
	return checkName("member id", selfID, MaxIDLen)
}

// appendID writes an id as its length byte and its bytes; ids are 1 to MaxIDLen bytes.
func appendID(b []byte, id string) []byte {
	return append(append(b, byte(len(id))), id...)
}

// readID reads what appendID wrote, refusing an empty or oversized id.
func readID(b []byte) (id string, rest []byte, ok bool) {
	if len(b) == 0 {
		return "", nil, false
	}
	n := int(b[0])
	if n == 0 || n > MaxIDLen || len(b) < 1+n {
		return "", nil, false
	}
	return string(b[1 : 1+n]), b[1+n:], true
}
