//go:build linux

package memberstate

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestDatasyncReportsError: datasync really calls fdatasync(2) and reports its failure (a pipe
// cannot be synced: EINVAL), so a no-op could not pass for it.
func TestDatasyncReportsError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	err = datasync(w)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "fdatasync" || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("datasync of a pipe: %v, want an fdatasync PathError with EINVAL", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "sync")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := datasync(f); err != nil {
		t.Fatalf("datasync of a file: %v", err)
	}
}
