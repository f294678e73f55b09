package harness

import (
	"errors"
	"fmt"
)

// The errors a run ends with. A command maps them to its exit status with ExitCode: the
// benchmarks themselves never exit the process.
var (
	// ErrInterrupted: ctx ended (a signal) before the run did; the members were stopped.
	ErrInterrupted = errors.New("interrupted")
)

// OptionsError is an invalid option, named by its flag.
type OptionsError struct{ Err error }

func (e *OptionsError) Error() string { return e.Err.Error() }
func (e *OptionsError) Unwrap() error { return e.Err }

// IncompleteError is a run that ended but did not do all it should: trials that did not
// converge, scenarios that broke off, systems that could not run, or a group that could not
// be measured any more. Dir keeps the logs.
type IncompleteError struct {
	Err error  // what went wrong, in words
	Dir string // the work dir, kept
}

func (e *IncompleteError) Error() string { return fmt.Sprintf("%v; logs kept in %s", e.Err, e.Dir) }
func (e *IncompleteError) Unwrap() error { return e.Err }

// Interrupted is ErrInterrupted with the work dir, which is kept.
func Interrupted(dir string) error {
	return fmt.Errorf("%w; members stopped; logs kept in %s", ErrInterrupted, dir)
}

// ExitCode is the exit status for a run's error: 0 none, 2 invalid options, 130 interrupted,
// 1 anything else.
func ExitCode(err error) int {
	var oe *OptionsError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInterrupted):
		return 130
	case errors.As(err, &oe):
		return 2
	}
	return 1
}
