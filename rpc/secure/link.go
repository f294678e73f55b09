package secure

import (
	"fmt"

	"github.com/flynn/noise"
)

// The host link handshake, version 2 (docs/protocol.md 4.1, "Host links"). A host of many
// groups keeps one connection to every other host, shared by all its members, so the
// handshake binds the two hosts, not a group: the prologue names the host-link protocol and
// no group, and msg1's payload names the dialling host and the host it dialled, each by its
// host id (the rpc address as the members' peers strings name it). The key set is the host's,
// which every group on it shares. The messages have version 1's shape and bounds:
//
//	msg1  initiator -> responder   version byte 0x02 | e | AEAD(initiator host id, target host id)
//	msg2  responder -> initiator   e, ee | AEAD(responder host id)
//
// Version 1 (Respond, RespondHost) refuses msg1 of version 2 with ErrVersion, and RespondLink
// refuses version 1 the same way: a responder that serves both reads the version byte first
// (MsgVersion) and calls the one that applies. A session of either version behaves the same;
// only what its PeerID names differs (a member id, or a host id).

const (
	// VersionLink is the first byte of a host link's msg1.
	VersionLink = 2
	// MaxHostIDLen bounds a host id: it travels where a member id does in version 1, so the
	// handshake messages keep version 1's bounds (MaxHandshakeLen).
	MaxHostIDLen = MaxIDLen

	linkPrologue = "dledger-host-link/2\x00"
)

// MsgVersion is msg1's version byte as a responder should read it before choosing Respond or
// RespondLink: 0 for an empty msg1 (either refuses it as malformed).
func MsgVersion(msg1 []byte) byte {
	if len(msg1) == 0 {
		return 0
	}
	return msg1[0]
}

// newLinkHandshake starts one side of NNpsk0 for a host link.
func newLinkHandshake(key *[KeySize]byte, initiator bool) (*noise.HandshakeState, error) {
	return noise.NewHandshakeState(noise.Config{
		CipherSuite:           suite,
		Pattern:               noise.HandshakeNN,
		Initiator:             initiator,
		Prologue:              []byte(linkPrologue),
		PresharedKey:          key[:],
		PresharedKeyPlacement: 0,
	})
}

// NewLinkInitiator starts a host link handshake from host selfHost to host remoteHost with
// keys' primary key, and returns msg1. Finish then checks that remoteHost answered. The
// error is a configuration error (no key, an empty or oversized host id).
func NewLinkInitiator(keys KeySet, selfHost, remoteHost string) (*Initiator, []byte, error) {
	if keys.Len() == 0 {
		return nil, nil, fmt.Errorf("secure: no key")
	}
	if err := checkName("host id", selfHost, MaxHostIDLen); err != nil {
		return nil, nil, err
	}
	if err := checkName("host id", remoteHost, MaxHostIDLen); err != nil {
		return nil, nil, err
	}
	key := keys.Primary()
	hs, err := newLinkHandshake(&key, true)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	payload := appendID(appendID(make([]byte, 0, 2+len(selfHost)+len(remoteHost)), selfHost), remoteHost)
	msg1, _, _, err := hs.WriteMessage([]byte{VersionLink}, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("secure: %w", err)
	}
	return &Initiator{hs: hs, remoteID: remoteHost, keyID: KeyID(key)}, msg1, nil
}

// RespondLink is the responder's side of a host link handshake: it reads msg1 (version 2),
// tries every key, and calls check with the dialling host's id and the host id it dialled;
// check accepts (nil) or refuses (an error wrapping ErrWrongPeer or ErrUnknownMember). The
// responder answers as the host dialled. The session's PeerID is the dialling host's id.
// Unlike RespondHost its cost does not depend on how many groups the host serves: at most
// one trial read per key.
func RespondLink(keys KeySet, msg1 []byte, check func(peerHost, target string) error) (msg2 []byte, s *Session, peerHost string, err error) {
	if keys.Len() == 0 {
		return nil, nil, "", fmt.Errorf("secure: no key")
	}
	if err := checkMsg1Version(msg1, VersionLink); err != nil {
		return nil, nil, "", err
	}
	var hs *noise.HandshakeState
	var payload []byte
	var keyID string
	err = ErrBadKey
	for i := range keys.keys {
		try, herr := newLinkHandshake(&keys.keys[i], false)
		if herr != nil {
			return nil, nil, "", fmt.Errorf("secure: %w", herr)
		}
		if p, _, _, rerr := try.ReadMessage(nil, msg1[1:]); rerr == nil {
			hs, payload, keyID, err = try, p, KeyID(keys.keys[i]), nil
			break
		}
	}
	if err != nil {
		return nil, nil, "", err
	}
	peerHost, target, err := msg1Payload(payload)
	if err != nil {
		return nil, nil, "", err
	}
	if err := check(peerHost, target); err != nil {
		return nil, nil, peerHost, err
	}
	msg2, cs1, cs2, err := hs.WriteMessage(make([]byte, 0, msg2MaxLen), appendID(nil, target))
	if err != nil || cs1 == nil {
		return nil, nil, peerHost, fmt.Errorf("secure: %w", err) // only a failing random source
	}
	return msg2, newSession(peerHost, keyID, cs2, cs1), peerHost, nil
}
