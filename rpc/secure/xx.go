package secure

import (
	"fmt"

	"github.com/flynn/noise"
)

// The member-key handshake, version 3 (docs/protocol.md 4.1, "Member keys"): each side
// proves it holds the private key of a static key pair that the other's trust list names
// under the id it claims. The pattern is Noise XX, so neither side needs the other's key
// before the handshake: a trust list may list two keys for an id while its key is replaced,
// and the dialler need not guess which one the member it dials uses now.
//
//	msg1  initiator -> responder   version byte 0x03 | e | group, initiator id, target id (clear)
//	msg2  responder -> initiator   e, ee, s, es | AEAD(responder id)
//	msg3  initiator -> responder   s, se | AEAD(empty)
//
// msg1's payload is in clear (XX's first message has no key yet) but is mixed into the
// handshake hash, so msg2 and msg3 authenticate it: a changed id fails the handshake. It lets
// the responder refuse a dialler it has no member for, or that dialled another member, before
// any Diffie-Hellman. The group is in msg1 rather than in the prologue so that a host of many
// groups reads it directly instead of trying each. An empty group makes it a host link
// (its ids are host ids, and the keys the hosts'). The dialler sends msg3 and its first
// sealed frame together, so the handshake costs it one round trip, as version 1 does.
//
// Static keys bind each id to its own key: holding member A's private key gets a handshake
// accepted as A only, in either direction (the initiator checks msg2's key against the id it
// dialled, the responder msg3's against the id msg1 claimed).

const (
	// VersionStatic is the first byte of msg1 of the member-key handshake.
	VersionStatic = 3

	staticPrologue = "dledger-peer-auth/3\x00"

	// msg1 = version | e | len group | group | len id | id | len target | target
	staticMsg1MinLen = 1 + dhLen + 1 + (1 + 1) + (1 + 1)
	staticMsg1MaxLen = 1 + dhLen + (1 + MaxGroupLen) + (1 + MaxIDLen) + (1 + MaxIDLen)
	// msg2 = e | AEAD(s) | AEAD(len id | id)
	staticMsg2MinLen = dhLen + (dhLen + tagLen) + (1 + 1) + tagLen
	staticMsg2MaxLen = dhLen + (dhLen + tagLen) + (1 + MaxIDLen) + tagLen
	// msg3 = AEAD(s) | AEAD(empty)
	staticMsg3Len = (dhLen + tagLen) + tagLen

	// maxRevoked bounds the keys an Identity remembers as revoked (for the metric's reason;
	// a forgotten one is refused all the same, as unknown_key).
	maxRevoked = 1024
)

// Identity is what a member (or host) authenticates with in the member-key handshake: its
// own key pair and the trust list it checks peers against, plus the keys earlier trust lists
// had and this one dropped (revoked, for the reason of a refusal). Immutable; a reload makes
// the next one (Next).
type Identity struct {
	key     StaticKey
	trust   *Trust
	revoked map[PublicKey]bool
}

// NewIdentity pairs key with trust for the member (or host) self. It refuses a key that
// trust does not list under self: the others would refuse every connection of this member.
// With self "" (a host whose members' ids are not known yet) the key must be listed under
// some id.
func NewIdentity(key StaticKey, trust *Trust, self string) (*Identity, error) {
	switch {
	case key.IsZero():
		return nil, fmt.Errorf("secure: no key pair")
	case trust == nil:
		return nil, fmt.Errorf("secure: no trust list")
	case self == "":
		if _, ok := trust.owner[key.pub]; !ok {
			return nil, fmt.Errorf("secure: this host's public key %s (%s) is not in the trust list", key.pub.ID(), key.pub)
		}
	case trust.Keys(self) == nil:
		return nil, fmt.Errorf("secure: %q, this member, is not in the trust list", self)
	case !trust.Trusts(self, key.Public()):
		return nil, fmt.Errorf("secure: this member's public key %s (%s) is not the trust list's key for %q", key.Public().ID(), key.Public(), self)
	}
	return &Identity{key: key, trust: trust, revoked: map[PublicKey]bool{}}, nil
}

// Next is the identity after a reload to key and trust: NewIdentity's checks, and every key
// this identity's trust list had that trust lacks counts as revoked from then on (a key that
// comes back is trusted again).
func (id *Identity) Next(key StaticKey, trust *Trust, self string) (*Identity, error) {
	n, err := NewIdentity(key, trust, self)
	if err != nil {
		return nil, err
	}
	for k := range id.revoked {
		if _, back := trust.owner[k]; !back && len(n.revoked) < maxRevoked {
			n.revoked[k] = true
		}
	}
	for k := range id.trust.owner {
		if _, kept := trust.owner[k]; !kept && len(n.revoked) < maxRevoked {
			n.revoked[k] = true
		}
	}
	return n, nil
}

// Key is this side's key pair.
func (id *Identity) Key() StaticKey { return id.key }

// Public is this side's public key.
func (id *Identity) Public() PublicKey { return id.key.pub }

// Trust is the trust list.
func (id *Identity) Trust() *Trust { return id.trust }

// Check says whether peer may be authenticated by key, with the reason if not (an error
// wrapping ErrUnknownMember, ErrWrongID, ErrRevoked or ErrUnknownKey). After a reload the
// rpc layer checks every live session's PeerID and PeerKey with it.
func (id *Identity) Check(peer string, key PublicKey) error {
	return id.trust.check(peer, key, func(k PublicKey) bool { return id.revoked[k] })
}

func newStaticHandshake(id *Identity, initiator bool) (*noise.HandshakeState, error) {
	return noise.NewHandshakeState(noise.Config{
		CipherSuite:   suite,
		Pattern:       noise.HandshakeXX,
		Initiator:     initiator,
		Prologue:      []byte(staticPrologue),
		StaticKeypair: noise.DHKey{Private: id.key.priv[:], Public: id.key.pub[:]},
	})
}

// StaticInitiator is the dialling side of a member-key handshake in progress; Finish
// consumes it.
type StaticInitiator struct {
	hs     *noise.HandshakeState
	id     *Identity
	target string
}

// NewStaticInitiator starts a member-key handshake from self to target of group (group ""
// for a host link, self and target then host ids) and returns msg1. The error is a
// configuration error, never a network one.
func NewStaticInitiator(id *Identity, group, self, target string) (*StaticInitiator, []byte, error) {
	if id == nil {
		return nil, nil, fmt.Errorf("secure: no identity")
	}
	if len(group) > MaxGroupLen {
		return nil, nil, fmt.Errorf("secure: group %q is longer than %d bytes", group, MaxGroupLen)
	}
	if err := checkName("id", self, MaxIDLen); err != nil {
		return nil, nil, err
	}
	if err := checkName("id", target, MaxIDLen); err != nil {
		return nil, nil, err
	}
	hs, err := newStaticHandshake(id, true)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	payload := make([]byte, 0, 3+len(group)+len(self)+len(target))
	payload = append(append(payload, byte(len(group))), group...)
	payload = appendID(appendID(payload, self), target)
	msg1, _, _, err := hs.WriteMessage([]byte{VersionStatic}, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	return &StaticInitiator{hs: hs, id: id, target: target}, msg1, nil
}

// Finish reads msg2 and returns msg3, to send before any sealed frame, and the session. It
// fails if msg2 does not verify or parse (ErrMalformed; ErrBadKey if its cryptography
// fails), names another member than the one dialled (ErrWrongPeer), or if the responder's
// static key is not the trust list's for the id dialled (ErrUnknownKey, ErrWrongID,
// ErrRevoked, ErrUnknownMember). Any call after the first fails.
func (in *StaticInitiator) Finish(msg2 []byte) (msg3 []byte, s *Session, err error) {
	hs := in.hs
	if hs == nil {
		return nil, nil, fmt.Errorf("%w: handshake already finished", ErrMalformed)
	}
	in.hs = nil
	if len(msg2) < staticMsg2MinLen || len(msg2) > staticMsg2MaxLen {
		return nil, nil, fmt.Errorf("%w: msg2 of %d bytes", ErrMalformed, len(msg2))
	}
	payload, _, _, err := hs.ReadMessage(nil, msg2)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: msg2 does not verify", ErrBadKey)
	}
	id, rest, ok := readID(payload)
	if !ok || len(rest) != 0 {
		return nil, nil, fmt.Errorf("%w: msg2 payload", ErrMalformed)
	}
	if id != in.target {
		return nil, nil, fmt.Errorf("%w: dialled %q, answered by %q", ErrWrongPeer, in.target, id)
	}
	rs := PublicKey(hs.PeerStatic())
	if err := in.id.Check(id, rs); err != nil {
		return nil, nil, err
	}
	msg3, cs1, cs2, err := hs.WriteMessage(make([]byte, 0, staticMsg3Len), nil)
	if err != nil || cs1 == nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	s = newSession(id, rs.ID(), cs1, cs2)
	s.peerKey, s.ownKey = rs, in.id.Public()
	return msg3, s, nil
}

// StaticResponder is the listening side of a member-key handshake between msg2 and msg3.
type StaticResponder struct {
	hs   *noise.HandshakeState
	id   *Identity
	peer string
}

// RespondStatic reads msg1 of a member-key handshake. check, called with the group, the
// dialler's claimed id and the id it dialled, accepts (nil) or refuses (an error wrapping
// ErrWrongPeer or ErrUnknownMember) before any Diffie-Hellman is done. On acceptance it
// returns msg2, answering as the id dialled, and the responder that reads msg3.
func RespondStatic(id *Identity, msg1 []byte, check func(group, peer, target string) error) (r *StaticResponder, msg2 []byte, group, peer, target string, err error) {
	if id == nil {
		return nil, nil, "", "", "", fmt.Errorf("secure: no identity")
	}
	if err := checkMsg1Version(msg1, VersionStatic); err != nil {
		return nil, nil, "", "", "", err
	}
	hs, err := newStaticHandshake(id, false)
	if err != nil {
		return nil, nil, "", "", "", fmt.Errorf("secure: %w", err)
	}
	payload, _, _, err := hs.ReadMessage(nil, msg1[1:])
	if err != nil {
		return nil, nil, "", "", "", fmt.Errorf("%w: msg1", ErrMalformed) // no cryptography yet: only a short message
	}
	group, peer, target, err = staticMsg1Payload(payload)
	if err != nil {
		return nil, nil, "", "", "", err
	}
	if err := check(group, peer, target); err != nil {
		return nil, nil, group, peer, target, err
	}
	msg2, _, _, err = hs.WriteMessage(make([]byte, 0, staticMsg2MaxLen), appendID(nil, target))
	if err != nil {
		return nil, nil, group, peer, target, fmt.Errorf("secure: %w", err)
	}
	return &StaticResponder{hs: hs, id: id, peer: peer}, msg2, group, peer, target, nil
}

// staticMsg1Payload reads msg1's clear payload: group (may be empty), dialler, target.
func staticMsg1Payload(p []byte) (group, peer, target string, err error) {
	if len(p) == 0 || len(p) < 1+int(p[0]) {
		return "", "", "", fmt.Errorf("%w: msg1 payload", ErrMalformed)
	}
	group, p = string(p[1:1+int(p[0])]), p[1+int(p[0]):]
	peer, target, err = msg1Payload(p)
	return group, peer, target, err
}

// Finish reads msg3 and returns the session, or refuses the dialler: msg3 does not verify
// (ErrBadKey) or its static key is not the trust list's for the id msg1 claimed
// (ErrUnknownKey, ErrWrongID, ErrRevoked, ErrUnknownMember). Any call after the first fails.
func (r *StaticResponder) Finish(msg3 []byte) (*Session, error) {
	hs := r.hs
	if hs == nil {
		return nil, fmt.Errorf("%w: handshake already finished", ErrMalformed)
	}
	r.hs = nil
	if len(msg3) != staticMsg3Len {
		return nil, fmt.Errorf("%w: msg3 of %d bytes", ErrMalformed, len(msg3))
	}
	payload, cs1, cs2, err := hs.ReadMessage(nil, msg3)
	if err != nil || cs1 == nil {
		return nil, fmt.Errorf("%w: msg3 does not verify", ErrBadKey)
	}
	if len(payload) != 0 {
		return nil, fmt.Errorf("%w: msg3 payload", ErrMalformed)
	}
	rs := PublicKey(hs.PeerStatic())
	if err := r.id.Check(r.peer, rs); err != nil {
		return nil, err
	}
	s := newSession(r.peer, rs.ID(), cs2, cs1)
	s.peerKey, s.ownKey = rs, r.id.Public()
	return s, nil
}

// Peer is the id msg1 claimed (not proven until Finish succeeds).
func (r *StaticResponder) Peer() string { return r.peer }
