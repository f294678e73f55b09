package memberstate

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// MemberKey is a member's public key as a configuration carries it (issue 32,
// docs/protocol.md 13.9): the X25519 public key, base64 (standard, padded) as a trust file
// writes it, that the member proves its id with. A configuration carries the keys of the
// members added with one, so that every member's trust list learns them with the
// configuration and forgets them when the member is removed. The elector treats a key as an
// opaque string; ValidateMemberKey only checks its form.
type MemberKey struct {
	ID  string
	Key string
}

// memberKeyLen is the length of a 32-byte key in padded base64.
const memberKeyLen = 44

// ValidateMemberKey checks that k is a base64 (standard, padded) 32-byte key, not all zeros.
func ValidateMemberKey(k string) error {
	raw, err := base64.StdEncoding.Strict().DecodeString(k)
	if err != nil || len(raw) != 32 || len(k) != memberKeyLen {
		return fmt.Errorf("key %q is not a base64-encoded 32-byte public key", k)
	}
	for _, b := range raw {
		if b != 0 {
			return nil
		}
	}
	return fmt.Errorf("key %q is all zeros", k)
}

// FormatMemberKeys writes keys in the peers string's form, id-key;id-key (base64 has no
// '-' and no ';', and an id has neither).
func FormatMemberKeys(keys []MemberKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.ID + "-" + k.Key
	}
	return strings.Join(parts, ";")
}

// ParseMemberKeys is the inverse of FormatMemberKeys ("" is no key). It checks each id and
// key; checkKeys checks them against a configuration's members.
func ParseMemberKeys(s string) ([]MemberKey, error) {
	if s == "" {
		return nil, nil
	}
	items := strings.Split(s, ";")
	keys := make([]MemberKey, 0, len(items))
	for _, item := range items {
		id, k, ok := strings.Cut(item, "-")
		if !ok {
			return nil, fmt.Errorf("keys: item %q has no '-' between id and key", item)
		}
		if err := ValidateID(id); err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		if err := ValidateMemberKey(k); err != nil {
			return nil, fmt.Errorf("keys: member %q: %w", id, err)
		}
		keys = append(keys, MemberKey{ID: id, Key: k})
	}
	return keys, nil
}

// checkKeys checks a configuration's keys: each names one of its members, at most once,
// with a well-formed key, and no key is two members' (whoever held it could speak as either).
func checkKeys(c ConfigRecord) error {
	ids, owner := map[string]bool{}, map[string]string{}
	for _, k := range c.Keys {
		switch {
		case !isMember(c, k.ID):
			return fmt.Errorf("keys: %q is not a member", k.ID)
		case ids[k.ID]:
			return fmt.Errorf("keys: %q has two keys", k.ID)
		case owner[k.Key] != "":
			return fmt.Errorf("keys: key %s is both %q's and %q's", k.Key, owner[k.Key], k.ID)
		}
		if err := ValidateMemberKey(k.Key); err != nil {
			return fmt.Errorf("keys: member %q: %w", k.ID, err)
		}
		ids[k.ID], owner[k.Key] = true, k.ID
	}
	return nil
}

func isMember(c ConfigRecord, id string) bool {
	for _, p := range c.Voters {
		if p.ID == id {
			return true
		}
	}
	for _, p := range c.NonVoters {
		if p.ID == id {
			return true
		}
	}
	return false
}
