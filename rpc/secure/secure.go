package secure

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

const (
	// KeySize is the size of a group key: Noise's pre-shared keys are 32 bytes.
	KeySize = 32
	// MaxKeys bounds a KeySet, and so the work one msg1 can make a responder do (one trial
	// read per key).
	MaxKeys = 8
	// MaxIDLen bounds a member id, as memberstate.ValidateID does; MaxGroupLen bounds a group
	// name (memberstate allows 128 bytes).
	MaxIDLen    = 64
	MaxGroupLen = 255

	// Overhead is what Seal adds to a frame body: the Poly1305 tag.
	Overhead = 16
	// MaxMessageLen is Noise's limit on any message, handshake or transport, so Seal takes
	// at most MaxMessageLen-Overhead bytes of plaintext. A frame body of the rpc layer must
	// fit in it.
	MaxMessageLen = 65535
	// MaxHandshakeLen bounds msg1 and msg2; the rpc layer can refuse a longer handshake frame
	// before reading its body.
	// msg1, msg2 or msg3 of any version.
	MaxHandshakeLen = staticMsg1MaxLen

	// Version is the first byte of msg1. It is also in the prologue, so changing it in
	// transit fails the handshake.
	Version = 1

	protocolPrologue = "dledger-peer-auth/1\x00"
	dhLen            = 32 // an X25519 public key
	tagLen           = Overhead

	// msg1 = version | e | AEAD(len id | id | len target | target)
	msg1MinLen = 1 + dhLen + (1 + 1 + 1 + 1) + tagLen
	msg1MaxLen = 1 + dhLen + (1 + MaxIDLen + 1 + MaxIDLen) + tagLen
	// msg2 = e | AEAD(len id | id)
	msg2MinLen = dhLen + (1 + 1) + tagLen
	msg2MaxLen = dhLen + (1 + MaxIDLen) + tagLen
)

// Sentinel errors. Every error from a handshake or a Session wraps exactly one of them;
// Reason names it for a metric. All of them are fatal for the connection.
var (
	// ErrMalformed: a message of the wrong size, or a payload that does not parse.
	ErrMalformed = errors.New("secure: malformed message")
	// ErrPlaintext: the peer sent an unauthenticated rpc frame (a member without a key, or an
	// insecure group) where msg1 was expected.
	ErrPlaintext = errors.New("secure: peer speaks unauthenticated rpc")
	// ErrVersion: msg1 of another version of this protocol.
	ErrVersion = errors.New("secure: unsupported peer-auth version")
	// ErrBadKey: the handshake did not verify with any key we accept. To a responder a wrong
	// key, a wrong group name and a tampered msg1 are indistinguishable.
	ErrBadKey = errors.New("secure: handshake failed: wrong key or wrong group")
	// ErrUnknownMember: the peer holds the key but its id is not one we accept.
	ErrUnknownMember = errors.New("secure: peer id is not a member")
	// ErrWrongPeer: msg1 is addressed to another member id, or the responder is not the
	// member the initiator dialled.
	ErrWrongPeer = errors.New("secure: peer is not the member expected")
	// ErrDecrypt: a frame failed to open: replayed, reordered, dropped before it, altered, or
	// from someone without the session keys. The session stays broken.
	ErrDecrypt = errors.New("secure: frame failed to authenticate")
	// ErrExhausted: the session's counter is spent (after 2^64-1 frames); reconnect.
	ErrExhausted = errors.New("secure: session counter exhausted")
	// ErrTooLarge: Seal was given more than MaxMessageLen-Overhead bytes.
	ErrTooLarge = errors.New("secure: plaintext above the maximum message size")
	// ErrUnknownKey (member keys): the peer's static key is in no trust list entry.
	ErrUnknownKey = errors.New("secure: peer key is not in the trust list")
	// ErrWrongID (member keys): the peer's static key is in the trust list, but under
	// another id than the one it claims: a member holding another's key, or a mixed-up file.
	ErrWrongID = errors.New("secure: peer key belongs to another id")
	// ErrRevoked (member keys): the peer's static key was in an earlier trust list and a
	// reload removed it; also the reason a live session is closed at that reload.
	ErrRevoked = errors.New("secure: peer key was revoked")
)

// Reasons, the values of Reason: stable labels for a metric.
const (
	ReasonMalformed     = "malformed"
	ReasonPlaintext     = "plaintext"
	ReasonVersion       = "version"
	ReasonBadKey        = "bad_key" // wrong key or wrong group
	ReasonUnknownMember = "unknown_member"
	ReasonWrongPeer     = "wrong_peer"
	ReasonDecrypt       = "decrypt_failed" // replay, reorder, tampering
	ReasonExhausted     = "exhausted"
	ReasonTooLarge      = "too_large"
	ReasonUnknownKey    = "unknown_key" // member keys: a key no trust list entry has
	ReasonWrongID       = "wrong_id"    // member keys: another id's key
	ReasonRevoked       = "revoked"     // member keys: a key a reload removed
	ReasonOther         = "other"       // not an error of this package (a configuration error)
)

var reasons = [...]struct {
	err    error
	reason string
}{
	{ErrMalformed, ReasonMalformed},
	{ErrPlaintext, ReasonPlaintext},
	{ErrVersion, ReasonVersion},
	{ErrBadKey, ReasonBadKey},
	{ErrUnknownMember, ReasonUnknownMember},
	{ErrWrongPeer, ReasonWrongPeer},
	{ErrDecrypt, ReasonDecrypt},
	{ErrExhausted, ReasonExhausted},
	{ErrTooLarge, ReasonTooLarge},
	{ErrUnknownKey, ReasonUnknownKey},
	{ErrWrongID, ReasonWrongID},
	{ErrRevoked, ReasonRevoked},
}

// Reason maps an error from this package to a metric label: "" for nil, ReasonOther for an
// error that wraps none of the sentinels.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ReasonOther
}

// KeySet is the keys a member holds: the primary key, used to dial, then the other keys it
// accepts while a rotation is rolled out. Build it with NewKeySet or LoadKeyFile; the zero
// value holds no key and every handshake refuses it.
type KeySet struct {
	keys []([KeySize]byte) // keys[0] is the primary; never modified after construction
}

// NewKeySet returns a set with primary as the dialling key and accepted as further keys a
// responder accepts. It refuses an all-zero key (the mark of an uninitialised key), a
// duplicate, and more than MaxKeys keys.
func NewKeySet(primary [KeySize]byte, accepted ...[KeySize]byte) (KeySet, error) {
	keys := make([][KeySize]byte, 0, 1+len(accepted))
	keys = append(keys, primary)
	keys = append(keys, accepted...)
	if len(keys) > MaxKeys {
		return KeySet{}, fmt.Errorf("secure: %d keys, at most %d", len(keys), MaxKeys)
	}
	for i, k := range keys {
		if k == ([KeySize]byte{}) {
			return KeySet{}, fmt.Errorf("secure: key %d is all zeros", i+1)
		}
		for j := range i {
			if keys[j] == k {
				return KeySet{}, fmt.Errorf("secure: keys %d and %d are the same", j+1, i+1)
			}
		}
	}
	return KeySet{keys: keys}, nil
}

// Primary returns the dialling key (zero for the zero KeySet).
func (ks KeySet) Primary() [KeySize]byte {
	if len(ks.keys) == 0 {
		return [KeySize]byte{}
	}
	return ks.keys[0]
}

// Keys returns a copy of every key, the primary first.
func (ks KeySet) Keys() [][KeySize]byte {
	return append([][KeySize]byte(nil), ks.keys...)
}

// Len is the number of keys.
func (ks KeySet) Len() int { return len(ks.keys) }

// Equal says whether ks and o hold the same keys in the same order (the same IDs, without
// hashing each key: a host compares every member's set with its own, issue 29).
func (ks KeySet) Equal(o KeySet) bool {
	return slices.Equal(ks.keys, o.keys)
}

// IDs returns the KeyID of every key, the primary first, for a log line at start.
func (ks KeySet) IDs() []string {
	ids := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		ids[i] = KeyID(k)
	}
	return ids
}

// KeyID is a short public name for a key, safe to log and to compare across members: the
// first 8 hex digits of SHA-256 over a label and the key. It reveals nothing useful about
// the key.
func KeyID(k [KeySize]byte) string {
	h := sha256.New()
	h.Write([]byte("dledger-peer-auth key id\x00"))
	h.Write(k[:])
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:4])
}

// checkName validates a group name or member id given to this package by its caller.
func checkName(what, s string, maxLen int) error {
	if s == "" || len(s) > maxLen {
		return fmt.Errorf("secure: %s %q must be 1 to %d bytes", what, s, maxLen)
	}
	return nil
}
