package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/rpc/secure"
)

// Auth configures peer authentication (package rpc/secure) for a Server or a Client. Either
// Keys holds the group key, or Insecure says explicitly that there is none: NewServer and
// NewClient refuse an Auth with neither, and one with both.
type Auth struct {
	// Keys is the group key set: the primary key dials, every key is accepted.
	Keys secure.KeySet
	// PeerKeys, instead of Keys, authenticates with per-member static keys (the member-key
	// handshake, secure.NewStaticInitiator): this side's key pair and the trust list its
	// peers are checked against, replaceable while running (PeerKeys.Reload). A Server and a
	// Client of one member share one PeerKeys.
	PeerKeys *PeerKeys
	// Insecure turns authentication off: frames are plaintext, as before peer authentication,
	// and anyone who reaches the port can speak for any member (depose the leader, burn votes).
	Insecure bool
	// Group and SelfID are this member's group name and id. With Keys both are required: they
	// are part of the handshake. A Client also sends its hello (a METADATA request as its
	// first frame on every connection, see the package comment) only when both are set.
	Group, SelfID string
	// Members are the ids a Server accepts connections from: the other members of the group.
	// A Client ignores it.
	Members []string
	// Host, for a Client, is this host's id (its rpc address as the members' peers strings
	// name it): the client then keeps host links (docs/protocol.md 4.1, "Host links"), whose
	// peers are hosts named by their host ids, with the version 2 handshake when Keys are set,
	// and a host hello as every connection's first frame. Group and SelfID must be empty:
	// every request names its own group and members in its header. A Server ignores it.
	Host string
}

func (a *Auth) check() error {
	if err := a.checkKeys(); err != nil {
		return err
	}
	switch {
	case a.Host != "" && (a.Group != "" || a.SelfID != ""):
		return errors.New("rpc: Auth.Host is for host links, whose requests name their group: leave Group and SelfID empty")
	case a.Host != "" && len(a.Host) > secure.MaxHostIDLen:
		return fmt.Errorf("rpc: Auth.Host %q must be at most %d bytes", a.Host, secure.MaxHostIDLen)
	case a.Insecure:
		return nil
	case a.Host != "":
		return nil
	case a.Group == "" || len(a.Group) > secure.MaxGroupLen:
		return fmt.Errorf("rpc: Auth.Group %q must be 1 to %d bytes", a.Group, secure.MaxGroupLen)
	case a.SelfID == "" || len(a.SelfID) > secure.MaxIDLen:
		return fmt.Errorf("rpc: Auth.SelfID %q must be 1 to %d bytes", a.SelfID, secure.MaxIDLen)
	}
	return nil
}

// checkHost is check for a Server on a Mux: Group, SelfID and Members come from the mux.
func (a *Auth) checkHost() error { return a.checkKeys() }

// checkKeys: exactly one of Keys, PeerKeys and Insecure.
func (a *Auth) checkKeys() error {
	n := 0
	for _, set := range []bool{a.Keys.Len() > 0, a.PeerKeys != nil, a.Insecure} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("rpc: Auth has more than one of Keys, PeerKeys and Insecure; choose one")
	case n == 0:
		return errors.New("rpc: peer authentication needs a key set (Auth.Keys) or member keys (Auth.PeerKeys), or Auth.Insecure")
	}
	return nil
}

func (a *Auth) secure() bool { return !a.Insecure }

// Reasons passed to Hooks.OnAuthFailure besides those of package secure (secure.Reason:
// malformed, plaintext, version, bad_key, unknown_member, wrong_peer, decrypt_failed,
// exhausted, too_large, other).
const (
	// ReasonWrongMember: a request on an authenticated connection carried a localId other
	// than the member id the connection authenticated as (server; the connection is closed).
	ReasonWrongMember = "wrong_member"
	// ReasonHandshakeTimeout: a connection did not complete the handshake and its first
	// sealed frame within FirstFrameTimeout of opening (server; it is closed). Members do
	// both at once on connecting, so this is a scan, a flood, or a replayed handshake.
	ReasonHandshakeTimeout = "handshake_timeout"
	// ReasonRefused: the peer closed the connection during our handshake (client): it does
	// not accept our key or our id, or it is at its connection limits.
	ReasonRefused = "refused"
)

// AuthFailureReasons lists every reason Hooks.OnAuthFailure reports, so metrics can declare
// their series up front.
func AuthFailureReasons() []string {
	return []string{secure.ReasonMalformed, secure.ReasonPlaintext, secure.ReasonVersion,
		secure.ReasonBadKey, secure.ReasonUnknownMember, secure.ReasonWrongPeer, secure.ReasonDecrypt,
		secure.ReasonExhausted, secure.ReasonTooLarge, secure.ReasonOther,
		secure.ReasonUnknownKey, secure.ReasonWrongID, secure.ReasonRevoked,
		ReasonWrongMember, ReasonHandshakeTimeout, ReasonRefused}
}

var errWrongMember = errors.New("rpc: request localId is not the member the connection authenticated as")

// bodyLimits returns the largest frame body on the wire and the largest plaintext body the
// encoder may produce. A sealed body is the plaintext plus secure.Overhead and must fit in a
// Noise message.
func bodyLimits(maxFrame int, secured bool) (wire, plain int) {
	if !secured {
		return maxFrame, maxFrame
	}
	wire = min(maxFrame, secure.MaxMessageLen)
	return wire, wire - secure.Overhead
}

// sealFrame seals fb's body in place and rewrites its length header. The pooled buffers
// have room for the tag, so this allocates nothing in steady state.
func sealFrame(s *secure.Session, fb *frameBuf) error {
	fb.b = slices.Grow(fb.b, secure.Overhead)
	body := fb.b[frameHeaderLen:]
	sealed, err := s.Seal(body[:0], body)
	if err != nil {
		return err
	}
	fb.b = fb.b[:frameHeaderLen+len(sealed)]
	binary.BigEndian.PutUint32(fb.b, uint32(len(sealed)))
	return nil
}

// appendFrame appends body as one frame (length header, body) to dst.
func appendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// handshake runs the initiator's side on a freshly dialled connection, bounded by deadline:
// msg1 as the first frame, msg2 as the answer. It returns the session for every later frame.
func handshake(conn net.Conn, a *Auth, peerID string, deadline time.Time) (*secure.Session, error) {
	if a.PeerKeys != nil {
		return handshakeStatic(conn, a, peerID, deadline)
	}
	in, msg1, err := secure.NewInitiator(a.Keys, a.Group, a.SelfID, peerID)
	if a.Host != "" {
		in, msg1, err = secure.NewLinkInitiator(a.Keys, a.Host, peerID)
	}
	if err != nil {
		return nil, err // a configuration error; check() makes it unreachable
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(appendFrame(nil, msg1)); err != nil {
		return nil, err
	}
	msg2, err := readMsg2(conn)
	if err != nil {
		return nil, err
	}
	s, err := in.Finish(msg2)
	if err != nil {
		return nil, err
	}
	return s, conn.SetDeadline(time.Time{})
}

// handshakeStatic is handshake with member keys (version 3): msg1, msg2 back, then msg3,
// which the first sealed frame (the hello) follows on the wire.
func handshakeStatic(conn net.Conn, a *Auth, peerID string, deadline time.Time) (*secure.Session, error) {
	group, self := a.Group, a.SelfID
	if a.Host != "" {
		group, self = "", a.Host // a host link: the hosts' ids, no group
	}
	in, msg1, err := secure.NewStaticInitiator(a.PeerKeys.Identity(), group, self, peerID)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(appendFrame(nil, msg1)); err != nil {
		return nil, err
	}
	msg2, err := readMsg2(conn)
	if err != nil {
		return nil, err
	}
	msg3, s, err := in.Finish(msg2)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(appendFrame(nil, msg3)); err != nil {
		return nil, err
	}
	return s, conn.SetDeadline(time.Time{})
}

// readMsg2 reads the responder's answer, one frame of at most secure.MaxHandshakeLen.
func readMsg2(conn net.Conn) ([]byte, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return nil, refusal(err)
	}
	n, err := frameLength(hdr[:], secure.MaxHandshakeLen)
	if err != nil {
		return nil, fmt.Errorf("%w: msg2 frame of %d bytes", secure.ErrMalformed, binary.BigEndian.Uint32(hdr[:]))
	}
	msg2 := make([]byte, n)
	if _, err := io.ReadFull(conn, msg2); err != nil {
		return nil, refusal(err)
	}
	return msg2, nil
}

// errRefused: the peer closed the connection during the handshake.
var errRefused = errors.New("rpc: peer closed the connection during the handshake (wrong key or id, or at its connection limits)")

// refusal turns the end of the connection into errRefused; timeouts and other errors pass.
func refusal(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	return err
}

// authReason names an authentication error for Hooks.OnAuthFailure.
func authReason(err error) string {
	switch {
	case errors.Is(err, errRefused):
		return ReasonRefused
	case errors.Is(err, errWrongMember):
		return ReasonWrongMember
	}
	return secure.Reason(err)
}
