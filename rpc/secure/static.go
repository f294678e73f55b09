package secure

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// Per-member static keys (docs/protocol.md 4.1, "Member keys"). Each member holds its own
// X25519 key pair; a trust list (trust.go) names every member's public key. The private key
// lives in a key file of its own, like a group key file: one base64 line, mode 0600, refused
// when group or others may access it.

// PublicKey is an X25519 public key: what a trust list names a member by.
type PublicKey [KeySize]byte

// String is the key in base64 (standard, padded), as a trust file writes it.
func (k PublicKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// ID is a short public name for the key, safe to log: the first 8 hex digits of a SHA-256
// over a label and the key (distinct from a group key's KeyID of the same bytes).
func (k PublicKey) ID() string { return KeyID([KeySize]byte(k)) }

// ParsePublicKey reads a public key as PublicKey.String writes it.
func ParsePublicKey(s string) (PublicKey, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) != KeySize {
		return PublicKey{}, fmt.Errorf("not a base64-encoded %d-byte public key", KeySize)
	}
	k := PublicKey(raw)
	if k == (PublicKey{}) {
		return PublicKey{}, errors.New("the public key is all zeros")
	}
	return k, nil
}

// StaticKey is one member's (or one host's) key pair. The zero value holds no key.
type StaticKey struct {
	priv [KeySize]byte
	pub  PublicKey
}

// GenerateStaticKey returns a new random key pair.
func GenerateStaticKey() (StaticKey, error) {
	var priv [KeySize]byte
	if _, err := rand.Read(priv[:]); err != nil {
		return StaticKey{}, fmt.Errorf("secure: generate key pair: %w", err)
	}
	return NewStaticKey(priv)
}

// NewStaticKey returns the key pair of a private key. It refuses a key whose public key is
// a low-order point (all zeros, from a private key of zeros, say).
func NewStaticKey(priv [KeySize]byte) (StaticKey, error) {
	pub, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		return StaticKey{}, fmt.Errorf("secure: private key: %w", err)
	}
	return StaticKey{priv: priv, pub: PublicKey(pub)}, nil
}

// Public is the key pair's public key.
func (k StaticKey) Public() PublicKey { return k.pub }

// IsZero says the StaticKey holds no key.
func (k StaticKey) IsZero() bool { return k.pub == PublicKey{} }

// WriteStaticKeyFile creates path with mode 0600 holding key's private key, with its public
// key in a comment. Like WriteKeyFile it never overwrites a file (fs.ErrExist) and removes
// what it created if writing fails.
func WriteStaticKeyFile(path string, key StaticKey) error {
	if key.IsZero() {
		return fmt.Errorf("secure: write key pair %s: no key", path)
	}
	var b bytes.Buffer
	b.WriteString("# dledger member private key: this member's alone; keep it secret (mode 0600).\n")
	fmt.Fprintf(&b, "# Its public key, for the trust list of every member: %s\n", key.pub)
	fmt.Fprintf(&b, "%s\n", base64.StdEncoding.EncodeToString(key.priv[:]))
	return writeNewFile(path, b.Bytes())
}

// LoadStaticKeyFile reads a private key file. It refuses what LoadKeyFile refuses (a file
// group or others may access, not a regular file, too large), a line that is not a base64
// 32-byte key, and anything but exactly one key.
func LoadStaticKeyFile(path string) (StaticKey, error) {
	data, err := readSecretFile(path)
	if err != nil {
		return StaticKey{}, err
	}
	var keys [][KeySize]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = stripComment(line)
		if line == "" {
			continue
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(line)
		if err != nil || len(raw) != KeySize {
			return StaticKey{}, fmt.Errorf("secure: key pair file %s line %d: not a base64-encoded %d-byte private key", path, i+1, KeySize)
		}
		keys = append(keys, [KeySize]byte(raw))
	}
	if len(keys) != 1 {
		return StaticKey{}, fmt.Errorf("secure: key pair file %s holds %d private keys, want 1", path, len(keys))
	}
	k, err := NewStaticKey(keys[0])
	if err != nil {
		return StaticKey{}, fmt.Errorf("secure: key pair file %s: %w", path, err)
	}
	return k, nil
}

func stripComment(line string) string {
	if c := strings.IndexByte(line, '#'); c >= 0 {
		line = line[:c]
	}
	return strings.TrimSpace(line)
}

// readSecretFile reads a file that must be private to its owner: a regular file no larger
// than maxKeyFileSize that group and others may not access.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secure: key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file we opened, so it can not be swapped after the check
	if err != nil {
		return nil, fmt.Errorf("secure: key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secure: key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secure: key file %s is accessible by group or others (mode %#o); run: chmod 600 %s", path, perm, path)
	}
	return readBounded(f, path, maxKeyFileSize)
}

func readBounded(r io.Reader, path string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("secure: %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("secure: %s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// writeNewFile creates path, mode 0600, with data, never over an existing file.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("secure: not overwriting key file %s: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("secure: write key file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("secure: write key file %s: %w", path, err)
	}
	return nil
}
