package secure

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// A key file is text: one base64 (standard, padded) key per line, the first the primary, the
// others accepted. '#' starts a comment, on a line of its own or after a key; blank lines are
// ignored. The file must not be accessible to group or others.

// maxKeyFileSize bounds what LoadKeyFile reads: MaxKeys lines of key and a lot of comments.
const maxKeyFileSize = 64 << 10

// GenerateKey returns a new random group key.
func GenerateKey() ([KeySize]byte, error) {
	var k [KeySize]byte
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("secure: generate key: %w", err)
	}
	return k, nil
}

// WriteKeyFile creates path with mode 0600 holding keys, the first the primary. It refuses to
// overwrite an existing file (the error wraps fs.ErrExist), and removes what it created if
// writing fails. Each key is followed by a comment naming its KeyID.
func WriteKeyFile(path string, keys ...[KeySize]byte) error {
	if len(keys) == 0 {
		return fmt.Errorf("secure: write key file %s: no key", path)
	}
	if _, err := NewKeySet(keys[0], keys[1:]...); err != nil {
		return fmt.Errorf("secure: write key file %s: %w", path, err)
	}
	var b bytes.Buffer
	b.WriteString("# dledger group key. Every member of the group needs it; keep it secret (mode 0600).\n")
	b.WriteString("# The first key is the primary (used to dial); others are accepted during a rotation.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s  # key id %s\n", base64.StdEncoding.EncodeToString(k[:]), KeyID(k))
	}
	return writeNewFile(path, b.Bytes())
}

// LoadKeyFile reads a key file. It refuses a file that group or others may access (with the
// chmod that fixes it), one that is not a regular file or is larger than 64 KiB, a line that
// is not a base64 32-byte key (by line number; the line itself is not repeated, it may be
// secret), duplicate or all-zero keys, no key, and more than MaxKeys.
func LoadKeyFile(path string) (KeySet, error) {
	data, err := readSecretFile(path)
	if err != nil {
		return KeySet{}, err
	}
	return parseKeys(path, data)
}

// parseKeys parses a key file's contents; name is used in errors only.
func parseKeys(name string, data []byte) (KeySet, error) {
	var (
		keys  [][KeySize]byte
		lines []int // line number of each key
	)
	for i, line := range strings.Split(string(data), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var k [KeySize]byte
		raw, err := base64.StdEncoding.Strict().DecodeString(line)
		if err != nil || len(raw) != KeySize {
			return KeySet{}, fmt.Errorf("secure: key file %s line %d: not a base64-encoded %d-byte key", name, i+1, KeySize)
		}
		copy(k[:], raw)
		if k == ([KeySize]byte{}) {
			return KeySet{}, fmt.Errorf("secure: key file %s line %d: the key is all zeros", name, i+1)
		}
		for j, prev := range keys {
			if prev == k {
				return KeySet{}, fmt.Errorf("secure: key file %s lines %d and %d: the same key twice", name, lines[j], i+1)
			}
		}
		if len(keys) == MaxKeys {
			return KeySet{}, fmt.Errorf("secure: key file %s line %d: more than %d keys", name, i+1, MaxKeys)
		}
		keys = append(keys, k)
		lines = append(lines, i+1)
	}
	if len(keys) == 0 {
		return KeySet{}, fmt.Errorf("secure: key file %s holds no key", name)
	}
	return NewKeySet(keys[0], keys[1:]...)
}
