package secure

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStaticKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n0.key")
	k := staticKey(t)
	if err := WriteStaticKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o", fi.Mode().Perm())
	}
	got, err := LoadStaticKeyFile(path)
	if err != nil || got != k {
		t.Fatalf("round trip: %v", err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), k.Public().String()) {
		t.Fatal("the file does not show its public key")
	}
	if err := WriteStaticKeyFile(path, staticKey(t)); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: %v", err)
	}
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644} {
		_ = os.Chmod(path, mode)
		if _, err := LoadStaticKeyFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %#o: %v", mode, err)
		}
	}
	_ = os.Chmod(path, 0o600)
	for name, content := range map[string]string{
		"two keys":  string(data) + "\n" + strings.TrimSpace(strings.Split(string(data), "\n")[2]),
		"malformed": "not-a-key\n",
		"empty":     "# nothing\n",
	} {
		p := filepath.Join(t.TempDir(), "k")
		_ = os.WriteFile(p, []byte(content), 0o600)
		if _, err := LoadStaticKeyFile(p); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestTrustFile(t *testing.T) {
	k1, k2, k3 := staticKey(t).Public(), staticKey(t).Public(), staticKey(t).Public()
	for _, c := range []struct {
		name, content, err string
	}{
		{"ok", "# g1\nn0 " + k1.String() + "\r\n\n n1\t" + k2.String() + " " + k3.String() + " # rotating\n", ""},
		{"duplicate id", "n0 " + k1.String() + "\nn1 " + k2.String() + "\nn0 " + k3.String(), "lines 1 and 3: id \"n0\" is listed twice"},
		{"malformed key", "n0 " + k1.String() + "\nn1 " + k2.String()[:20], "line 2, key 1 of \"n1\": not a base64"},
		{"id without key", "n0\n", "line 1: want an id and its public key"},
		{"one key two ids", "n0 " + k1.String() + "\nn1 " + k1.String(), "listed for both \"n0\" and \"n1\""},
		{"same key twice", "n0 " + k1.String() + " " + k1.String(), "lists key"},
		{"too many keys", "n0 " + strings.Repeat(staticKey(t).Public().String()+" ", 1) + k1.String() + " " + k2.String() + " " + k3.String() + " " + staticKey(t).Public().String(), "at most 4"},
		{"zero key", "n0 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "all zeros"},
		{"empty", "# none\n", "lists no id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trust")
			_ = os.WriteFile(path, []byte(c.content), 0o644) // public keys: any mode
			tr, err := LoadTrustFile(path)
			if c.err == "" {
				if err != nil || !tr.Trusts("n0", k1) || !tr.Trusts("n1", k3) || tr.Trusts("n0", k2) || len(tr.IDs()) != 2 {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err %v, want it to name %s and say %q", err, path, c.err)
			}
		})
	}
}

// FuzzParseTrust: arbitrary trust files never panic, and a list that loads is consistent.
func FuzzParseTrust(f *testing.F) {
	f.Add([]byte("n0 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=  # x\nn1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyE=\n"))
	f.Add([]byte("n0\n"))
	f.Add([]byte("\r\n\x00# \t"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTrust("fuzz", data)
		if err != nil {
			return
		}
		for _, id := range tr.IDs() {
			keys := tr.Keys(id)
			if len(keys) == 0 || len(keys) > MaxKeysPerID {
				t.Fatalf("%q has %d keys", id, len(keys))
			}
			for _, k := range keys {
				if !tr.Trusts(id, k) {
					t.Fatalf("%q's key is not trusted for it", id)
				}
			}
		}
	})
}
