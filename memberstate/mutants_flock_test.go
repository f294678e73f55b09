//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package memberstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A LOCK file that names no usable pid (empty, garbage, 0, negative) gives "pid unknown", never
// "pid 0": no process has pid 0 to look for. Kills `pid <= 0` turned into `pid < 0` in
// inUseError.
func TestInUseErrorWithoutAUsablePid(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "LOCK")
	for _, content := range []string{"", "x", "0", "-3"} {
		if err := os.WriteFile(lock, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := inUseError(dir, lock); !strings.Contains(err.Error(), "pid unknown") {
			t.Errorf("LOCK holding %q: %v, want pid unknown", content, err)
		}
	}
	if err := os.WriteFile(lock, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := inUseError(dir, lock); !strings.Contains(err.Error(), "pid 1)") {
		t.Errorf("LOCK holding 1: %v, want pid 1", err)
	}
}
