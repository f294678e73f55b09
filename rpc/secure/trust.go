package secure

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Trust is a trust list: the public keys each member (or host) id may authenticate with.
// An id has one key, or up to MaxKeysPerID while its key is being replaced. It is immutable
// once built; a reload builds a new one.
//
// A trust file is text, one line per id: the id, then one or more public keys (base64), all
// separated by white space. '#' starts a comment; blank lines are ignored.
//
//	# dledger trust list of group g1
//	n0  mC2I0Vy5Hqf0Yk0Bq6zJbq7l9o9Q8p3cKj5Yc2V4i0E=
//	n1  TjP7+f0h4t2xI1K0bq8E6Yb1i2u0v9w3z8c5Q3r8J2s=  5P1y0wX8qO6nB7d3g2m1K0u9h4t8r5e2w1q7z3c6v0A=
//
// It refuses an id twice (a second line would silently widen or shadow the first), one key
// under two ids (whoever holds it could then speak as either, which per-member keys exist to
// prevent), a malformed key or id, and more than MaxTrustIDs ids.
type Trust struct {
	keys  map[string][]PublicKey // id -> its keys, the first the one it is expected to dial with
	owner map[PublicKey]string   // key -> id
}

const (
	// MaxKeysPerID bounds the keys one id may have: the current key, and the next while a
	// rotation is rolled out.
	MaxKeysPerID = 4
	// MaxTrustIDs bounds a trust list.
	MaxTrustIDs = 4096
	// maxTrustFileSize bounds what LoadTrustFile reads: MaxTrustIDs lines of a few keys.
	maxTrustFileSize = 1 << 20
)

// NewTrust builds a trust list from id -> keys, with ParseTrust's rules.
func NewTrust(entries map[string][]PublicKey) (*Trust, error) {
	t := &Trust{keys: make(map[string][]PublicKey, len(entries)), owner: map[PublicKey]string{}}
	ids := make([]string, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	sort.Strings(ids) // errors name the same id whatever the map's order
	for _, id := range ids {
		if err := t.add(id, entries[id]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Trust) add(id string, keys []PublicKey) error {
	switch {
	case checkName("trust list id", id, MaxIDLen) != nil || strings.ContainsAny(id, " \t#"):
		return fmt.Errorf("id %q must be 1 to %d bytes without white space or '#'", id, MaxIDLen)
	case t.keys[id] != nil:
		return fmt.Errorf("id %q is listed twice", id)
	case len(keys) == 0:
		return fmt.Errorf("id %q has no key", id)
	case len(keys) > MaxKeysPerID:
		return fmt.Errorf("id %q has %d keys, at most %d", id, len(keys), MaxKeysPerID)
	case len(t.keys) == MaxTrustIDs:
		return fmt.Errorf("more than %d ids", MaxTrustIDs)
	}
	for _, k := range keys {
		if k == (PublicKey{}) {
			return fmt.Errorf("id %q: a key is all zeros", id)
		}
		if other, dup := t.owner[k]; dup {
			if other == id {
				return fmt.Errorf("id %q lists key %s twice", id, k.ID())
			}
			return fmt.Errorf("key %s is listed for both %q and %q: each member needs its own key", k.ID(), other, id)
		}
		t.owner[k] = id
	}
	t.keys[id] = append([]PublicKey(nil), keys...)
	return nil
}

// ParseTrust parses a trust file's contents; name is used in errors only.
func ParseTrust(name string, data []byte) (*Trust, error) {
	t := &Trust{keys: map[string][]PublicKey{}, owner: map[PublicKey]string{}}
	lineOf := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(stripComment(line))
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("secure: trust file %s line %d: want an id and its public key", name, i+1)
		}
		keys := make([]PublicKey, 0, len(fields)-1)
		for j, f := range fields[1:] {
			k, err := ParsePublicKey(f)
			if err != nil {
				return nil, fmt.Errorf("secure: trust file %s line %d, key %d of %q: %v", name, i+1, j+1, fields[0], err)
			}
			keys = append(keys, k)
		}
		if prev, dup := lineOf[fields[0]]; dup {
			return nil, fmt.Errorf("secure: trust file %s lines %d and %d: id %q is listed twice", name, prev, i+1, fields[0])
		}
		if err := t.add(fields[0], keys); err != nil {
			return nil, fmt.Errorf("secure: trust file %s line %d: %v", name, i+1, err)
		}
		lineOf[fields[0]] = i + 1
	}
	if len(t.keys) == 0 {
		return nil, fmt.Errorf("secure: trust file %s lists no id", name)
	}
	return t, nil
}

// LoadTrustFile reads a trust file. It holds public keys only, so any mode is accepted, but
// it must be a regular file of at most 1 MiB.
func LoadTrustFile(path string) (*Trust, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secure: trust file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secure: trust file %s is not a regular file", path)
	}
	data, err := readBounded(f, path, maxTrustFileSize)
	if err != nil {
		return nil, err
	}
	return ParseTrust(path, data)
}

// Keys returns id's keys (nil for an id not listed).
func (t *Trust) Keys(id string) []PublicKey {
	if t == nil {
		return nil
	}
	return append([]PublicKey(nil), t.keys[id]...)
}

// IDs returns every id listed, sorted.
func (t *Trust) IDs() []string {
	if t == nil {
		return nil
	}
	ids := make([]string, 0, len(t.keys))
	for id := range t.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// OwnerOf is the id key is listed under ("" if none).
func (t *Trust) OwnerOf(key PublicKey) string {
	if t == nil {
		return ""
	}
	return t.owner[key]
}

// Trusts says whether key may authenticate as id.
func (t *Trust) Trusts(id string, key PublicKey) bool {
	return t != nil && t.owner[key] == id && id != ""
}

// check is Trusts with the reason of a refusal: ErrUnknownMember (id not listed),
// ErrWrongID (the key is another id's), ErrRevoked (revoked says it was trusted before a
// reload), ErrUnknownKey (a key never seen).
func (t *Trust) check(id string, key PublicKey, revoked func(PublicKey) bool) error {
	switch owner, known := t.owner[key]; {
	case known && owner == id:
		return nil
	case known:
		return fmt.Errorf("%w: key %s is %q's, not %q's", ErrWrongID, key.ID(), owner, id)
	case t.keys[id] == nil:
		return fmt.Errorf("%w: %q is not in the trust list", ErrUnknownMember, id)
	case revoked != nil && revoked(key):
		return fmt.Errorf("%w: %q authenticated with revoked key %s", ErrRevoked, id, key.ID())
	}
	return fmt.Errorf("%w: %q authenticated with key %s, which is not in the trust list", ErrUnknownKey, id, key.ID())
}
