package harness

import (
	"errors"
	"fmt"
	"testing"
)

// TestExitCode: each kind of run error maps to its exit status, also when wrapped, so the
// commands keep the statuses they had when the benchmarks returned them.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{Interrupted("/tmp/x"), 130},
		{fmt.Errorf("run: %w", ErrInterrupted), 130},
		{&OptionsError{errors.New("--members 2")}, 2},
		{fmt.Errorf("calm: %w", &OptionsError{errors.New("--poll")}), 2},
		{&IncompleteError{Err: errors.New("1 of 3 trials failed"), Dir: "/tmp/x"}, 1},
		{errors.New("mkdir: no space"), 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if got := (&IncompleteError{Err: errors.New("2 scenario(s) broke off"), Dir: "/tmp/x"}).Error(); got != "2 scenario(s) broke off; logs kept in /tmp/x" {
		t.Errorf("IncompleteError = %q", got)
	}
}
