package secure

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "group.key")
	k1, k2 := newKey(t), newKey(t)
	if err := WriteKeyFile(path, k1, k2); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o, want 0600", fi.Mode().Perm())
	}
	ks, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if keys := ks.Keys(); len(keys) != 2 || keys[0] != k1 || keys[1] != k2 {
		t.Fatal("keys differ after the round trip")
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "# key id "+KeyID(k1)) {
		t.Fatalf("file does not name its keys:\n%s", data)
	}
}

func TestWriteKeyFileRefusesOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "group.key")
	k := newKey(t)
	if err := WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	err := WriteKeyFile(path, newKey(t))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second write: %v", err)
	}
	ks, err := LoadKeyFile(path)
	if err != nil || ks.Primary() != k {
		t.Fatalf("the original key was not kept: %v", err)
	}
}

func TestWriteKeyFileRefusesBadKeys(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t)
	for name, keys := range map[string][][KeySize]byte{
		"none":      nil,
		"zero":      {{}},
		"duplicate": {k, k},
	} {
		path := filepath.Join(dir, name)
		if err := WriteKeyFile(path, keys...); err == nil {
			t.Errorf("%s: written", name)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a file was left behind", name)
		}
	}
}

func TestLoadKeyFileRefusesLoosePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "group.key")
	if err := WriteKeyFile(path, newKey(t)); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o620, 0o602, 0o644, 0o660, 0o610} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %#o: err %v, want one naming the file and the chmod", mode, err)
		}
	}
	for _, mode := range []fs.FileMode{0o400, 0o600} {
		_ = os.Chmod(path, mode)
		if _, err := LoadKeyFile(path); err != nil {
			t.Errorf("mode %#o refused: %v", mode, err)
		}
	}
}

func TestLoadKeyFileRefusesOthers(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadKeyFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", maxKeyFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(big); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestKeyFileFormat(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	b1 := base64.StdEncoding.EncodeToString(k1[:])
	b2 := base64.StdEncoding.EncodeToString(k2[:])
	short := base64.StdEncoding.EncodeToString(k1[:16])
	long := base64.StdEncoding.EncodeToString(append(k1[:], 1))
	zero := base64.StdEncoding.EncodeToString(make([]byte, KeySize))
	unpadded := base64.RawStdEncoding.EncodeToString(k1[:])
	var many strings.Builder
	for range MaxKeys + 1 {
		k := newKey(t)
		many.WriteString(base64.StdEncoding.EncodeToString(k[:]) + "\n")
	}

	for _, c := range []struct {
		name    string
		content string
		err     string // "" for success
		primary [KeySize]byte
		n       int
	}{
		{"one key", b1 + "\n", "", k1, 1},
		{"comments, blank lines, CRLF, inline comment", "# group key\r\n\r\n  " + b1 + "  # new\r\n#old\n" + b2, "", k1, 2},
		{"no trailing newline", b2 + "\n" + b1, "", k2, 2},
		{"not base64", "# c\n" + b1 + "\nnot-a-key!\n", "line 3: not a base64", [KeySize]byte{}, 0},
		{"short key", short + "\n", "line 1: not a base64", [KeySize]byte{}, 0},
		{"long key", "\n" + long, "line 2: not a base64", [KeySize]byte{}, 0},
		{"unpadded", unpadded, "line 1: not a base64", [KeySize]byte{}, 0},
		{"two keys on a line", b1 + " " + b2, "line 1: not a base64", [KeySize]byte{}, 0},
		{"zero key", zero, "line 1: the key is all zeros", [KeySize]byte{}, 0},
		{"duplicate", b1 + "\n# x\n" + b1 + "\n", "lines 1 and 3", [KeySize]byte{}, 0},
		{"only comments", "# nothing\n\n", "holds no key", [KeySize]byte{}, 0},
		{"empty", "", "holds no key", [KeySize]byte{}, 0},
		{"too many", many.String(), "line 9: more than 8 keys", [KeySize]byte{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			ks, err := LoadKeyFile(path)
			if c.err == "" {
				if err != nil || ks.Primary() != c.primary || ks.Len() != c.n {
					t.Fatalf("err %v, %d keys", err, ks.Len())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err %v, want it to name %s and say %q", err, path, c.err)
			}
			if strings.Contains(err.Error(), b1) || strings.Contains(err.Error(), short) {
				t.Fatalf("the error repeats key material: %v", err)
			}
		})
	}
}
