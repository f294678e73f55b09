package secure

import (
	"crypto/cipher"
	"encoding/binary"
	"math"

	"github.com/flynn/noise"
	"golang.org/x/crypto/chacha20poly1305"
)

// Session protects the frames of one authenticated connection, after the handshake.
//
// It is Noise's transport phase: each direction has its own key and a 64-bit counter that
// is the AEAD nonce (4 zero bytes, then the counter little-endian, as Noise specifies for
// ChaChaPoly), with no associated data. The keys come from the handshake's Split; the
// counters are ours rather than noise.CipherState's because that one allocates a nonce on
// every call, and a heartbeat should cost nothing to seal (TestSessionMatchesNoise checks
// the bytes are the same).
//
// Seal calls must be made one at a time, in the order the frames go on the wire; Open calls
// one at a time, in the order frames arrived. A Seal may run concurrently with an Open: the
// two directions share nothing.
type Session struct {
	peerID  string
	keyID   string
	peerKey PublicKey // member keys: the peer's static key; zero with a group key
	ownKey  PublicKey // member keys: the static key this side authenticated with
	send    direction
	recv    direction
}

type direction struct {
	aead   cipher.AEAD
	n      uint64   // the counter of the next frame
	nonce  [12]byte // scratch, kept here so passing it to the AEAD interface does not allocate
	broken bool     // recv only: a frame failed to open
}

// maxCounter is Noise's MaxNonce: 2^64-1 is reserved.
const maxCounter = math.MaxUint64 - 1

func newSession(peerID, keyID string, send, recv *noise.CipherState) *Session {
	s := &Session{peerID: peerID, keyID: keyID}
	s.send.init(send)
	s.recv.init(recv)
	return s
}

func (d *direction) init(cs *noise.CipherState) {
	k := cs.UnsafeKey()
	aead, err := chacha20poly1305.New(k[:])
	if err != nil {
		panic(err) // a 32-byte key is always accepted
	}
	d.aead = aead
}

func (d *direction) nextNonce() []byte {
	binary.LittleEndian.PutUint64(d.nonce[4:], d.n)
	return d.nonce[:]
}

// PeerID is the member id the peer authenticated as. The rpc layer must refuse any request
// whose localId differs.
func (s *Session) PeerID() string { return s.peerID }

// PeerKey is the static public key the peer authenticated with (member keys, handshake
// version 3), or zero (a group key).
func (s *Session) PeerKey() PublicKey { return s.peerKey }

// OwnKey is the static public key this side authenticated with (member keys), or zero: a
// rotation of our own key replaces the connections made with the old one (rpc.PeerKeys.Reload).
func (s *Session) OwnKey() PublicKey { return s.ownKey }

// KeyID names the key this session was made with (KeyID of that key): during a rotation it
// tells which connections still use the old key.
func (s *Session) KeyID() string { return s.keyID }

// Seal appends the sealed plaintext (len(plaintext)+Overhead bytes) to dst and returns the
// extended slice; it allocates only if dst lacks the capacity. To seal in place, pass
// plaintext[:0] as dst; otherwise dst's spare capacity must not overlap plaintext. It fails
// with ErrTooLarge above MaxMessageLen-Overhead bytes of plaintext (nothing is consumed),
// and with ErrExhausted after 2^64-1 frames.
func (s *Session) Seal(dst, plaintext []byte) ([]byte, error) {
	d := &s.send
	if len(plaintext) > MaxMessageLen-Overhead {
		return dst, ErrTooLarge
	}
	if d.n > maxCounter {
		return dst, ErrExhausted
	}
	out := d.aead.Seal(dst, d.nextNonce(), plaintext, nil)
	d.n++
	return out, nil
}

// Open authenticates and decrypts the next frame body from the peer, appends the plaintext
// to dst and returns the extended slice; to open in place, pass ciphertext[:0] as dst. A
// frame that fails (ErrDecrypt: replayed, reordered, one missing before it, altered, forged;
// ErrMalformed: shorter than a tag or above MaxMessageLen) breaks the session: every later
// Open fails too, and the connection must be closed.
func (s *Session) Open(dst, ciphertext []byte) ([]byte, error) {
	d := &s.recv
	switch {
	case d.broken:
		return dst, ErrDecrypt
	case len(ciphertext) < Overhead || len(ciphertext) > MaxMessageLen:
		d.broken = true
		return dst, ErrMalformed
	case d.n > maxCounter:
		d.broken = true
		return dst, ErrExhausted
	}
	out, err := d.aead.Open(dst, d.nextNonce(), ciphertext, nil)
	if err != nil {
		d.broken = true
		return dst, ErrDecrypt
	}
	d.n++
	return out, nil
}
