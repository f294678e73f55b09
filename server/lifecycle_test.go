package server

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// A Start that fails (its rpc port is taken) releases what New took: the data dir's lock and
// the metrics on the caller's registry, so a second New on the same dir and registry succeeds
// without a Stop (issue 34 item 8). The failed member stays stopped.
func TestFailedStartReleasesTheDataDir(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reg := prometheus.NewRegistry()
	cfg := soloConfig(t)
	cfg.Peers = "n0-" + ln.Addr().String()
	s, err := New(cfg, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	again, err := New(cfg, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("New on the same data dir after a failed Start: %v", err)
	}
	defer again.Stop(context.Background())
	if err := s.Start(); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after a failed Start: %v, want ErrStopped", err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after a failed Start: %v", err)
	}
}

// Start before the first UpdateLedger (LedgerStorage) is refused with ErrNoLedger and changes
// nothing: the member starts once the ledger is reported. UpdateLedger on a member without
// storage is ErrNoStorage.
func TestStartBeforeUpdateLedgerIsErrNoLedger(t *testing.T) {
	cfg := soloConfig(t)
	cfg.Ledger = LedgerStorage
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.Start(); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("Start before UpdateLedger: %v, want ErrNoLedger", err)
	}
	if err := s.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start after UpdateLedger: %v", err)
	}
	if err := s.Start(); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want ErrAlreadyStarted", err)
	}
	none, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Stop(context.Background())
	if err := none.UpdateLedger(1, 1); !errors.Is(err, ErrNoStorage) {
		t.Fatalf("UpdateLedger with LedgerNone: %v, want ErrNoStorage", err)
	}
}

// The library's errors speak of Config fields, not of the command line's flags: a broker has
// no --key-file or --ledger (issue 34 item 8). The daemon's settings may name their flags.
func TestLibraryErrorsNameNoFlag(t *testing.T) {
	noKey := soloConfig(t)
	noKey.Keys = KeySet{}
	noDir := soloConfig(t)
	noDir.DataDir = ""
	_, newErr := New(noDir)
	first := soloConfig(t)
	s, err := New(first)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	_, lockedErr := New(first)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s, protocol.LEADER) // its term is in vote.state now, with its owner
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := first
	other.SelfID, other.Peers = "n1", "n1-127.0.0.1:1"
	_, foreignErr := New(other)
	for name, err := range map[string]error{"no key": noKey.Validate(), "no data dir": newErr,
		"no ledger": ErrNoLedger, "no storage": ErrNoStorage, "data dir in use": lockedErr,
		"another member's data dir": foreignErr} {
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %q names a command-line flag", name, err)
		}
	}
}

// failingAttacher subscribes to the member's events, then fails, as a process's hooks whose
// metrics cannot be registered do.
type failingAttacher struct{ attached, detached atomic.Int32 }

func (a *failingAttacher) Attach(s *Server) (Attachment, error) {
	a.attached.Add(1)
	return Attachment{}, errors.New("hook metrics: already registered")
}

func (a *failingAttacher) DetachTimeout() time.Duration { return 0 }

// okAttacher attaches and counts its detaches.
type okAttacher struct{ failingAttacher }

func (a *okAttacher) Attach(s *Server) (Attachment, error) {
	a.attached.Add(1)
	return Attachment{Detach: func(context.Context, *dledger.RoleEvent) { a.detached.Add(1) }}, nil
}

// A New that fails at its last step (an attacher fails: the process's hook metrics cannot be
// registered) leaves no goroutine behind: the listeners it had subscribed (metrics,
// WithListener) are unsubscribed and its dispatcher closed, an attacher attached before the
// failing one is detached, and the data dir is free for the next New.
func TestFailedNewLeavesNoListenerGoroutines(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := soloConfig(t)
	before := runtime.NumGoroutine()
	first, fail := &okAttacher{}, &failingAttacher{}
	for i := 0; i < 20; i++ {
		_, err := New(cfg, WithRegisterer(reg), WithListener(func(dledger.RoleEvent) {}),
			WithAttacher(first), WithAttacher(fail))
		if err == nil || !strings.Contains(err.Error(), "hook metrics") {
			t.Fatalf("New with a failing attacher: %v, want its error", err)
		}
	}
	if a, d := first.attached.Load(), first.detached.Load(); a != 20 || d != 20 {
		t.Fatalf("the attacher before the failing one: attached %d, detached %d times; want 20, 20", a, d)
	}
	// Twenty failed News each left three listener goroutines before the fix; allow a few
	// unrelated ones (the runtime's, the test framework's) to come and go.
	dledgertest.Eventually(t, 10*time.Second, "the failed News' goroutines to end", func() bool {
		return runtime.NumGoroutine() <= before+5
	})
}
