package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// recorder keeps every role event a listener received.
type recorder struct {
	mu  sync.Mutex
	evs []dledger.RoleEvent
}

func (r *recorder) add(ev dledger.RoleEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) events() []dledger.RoleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dledger.RoleEvent(nil), r.evs...)
}

func soloConfig(t *testing.T) Config {
	return Config{Keys: testKeys, Group: "g", SelfID: "n0", Peers: peersString(freePorts(t, 1)), DataDir: t.TempDir(),
		Election: fastTimings(), Ledger: LedgerNone}
}

func awaitRole(t *testing.T, s *Server, role protocol.Role) Status {
	t.Helper()
	deadline := time.Now().Add(electionLimit)
	for {
		st := s.Status()
		if st.Role == role {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %v: %+v", st.SelfID, role, st)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// A leader that stops with nobody to hand over to must still tell its listeners it no longer
// leads, or a broker fencing on role events keeps writing.
func TestStopWithoutHandOverAnnouncesTheEnd(t *testing.T) {
	var rec recorder
	s, err := New(soloConfig(t), WithListener(rec.add))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	lead := awaitRole(t, s, protocol.LEADER)
	late := &recorder{} // a later subscriber sees the same end
	s.Subscribe(late.add)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*recorder{"WithListener": &rec, "Subscribe": late} {
		evs := r.events()
		if len(evs) < 2 {
			t.Fatalf("%s: events %+v", name, evs)
		}
		last := evs[len(evs)-1]
		if last.Role == protocol.LEADER || last.Role != protocol.UNKNOWN || last.LeaderID != "" {
			t.Fatalf("%s: last event after Stop is %+v, want role UNKNOWN and no leader (events %+v)", name, last, evs)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Term < evs[i-1].Term || evs[i].Seq <= evs[i-1].Seq {
				t.Fatalf("%s: event %d %+v goes back from %+v (S5)", name, i, evs[i], evs[i-1])
			}
		}
		if last.Term != lead.Term {
			t.Fatalf("%s: final event at term %d, want the leader's term %d", name, last.Term, lead.Term)
		}
	}
	if st := s.Status(); st.Role != protocol.UNKNOWN || st.LeaderID != "" || st.Term != lead.Term {
		t.Fatalf("Status after Stop: role %v leader %q term %d, want UNKNOWN, none, %d", st.Role, st.LeaderID, st.Term, lead.Term)
	}
	if s.ServesAsLeader(s.FullStatus()) { // /v1/leader's check (server/daemon)
		t.Fatal("the leader check passes after Stop")
	}
}

// A broker must be able to recreate a member on its own registry after a failed New, and
// after Stop (started or not).
func TestMetricsLeaveTheCallersRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	good := soloConfig(t)
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, memberstate.StateFileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(c *Config){
		"preferred": func(c *Config) { c.Election.PreferredLeaderIDs = []string{"n8"} },
		"peers":     func(c *Config) { c.Peers = "n0-127.0.0.1" },
		"self":      func(c *Config) { c.SelfID = "n7" },
		"corrupt":   func(c *Config) { c.DataDir = corrupt },
	}
	for name, mut := range bad {
		c := good
		mut(&c)
		if _, err := New(c, WithRegisterer(reg)); err == nil {
			t.Fatalf("%s: bad config accepted", name)
		}
	}
	s, err := New(good, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("New after failed News on the same registry: %v", err)
	}
	s.Stop(context.Background()) // never started
	s, err = New(good, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("New after Stop of an unstarted member: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s, protocol.LEADER)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Fatalf("after Stop the caller's registry still holds %d families (%v)", len(mfs), err)
	}
	s, err = New(good, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("New after Stop of a started member: %v", err)
	}
	s.Stop(context.Background())
}

// A second Stop while the first is still running must not report "stopped" early.
func TestConcurrentStopWaitsForTheFirst(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	// This listener holds the first Stop up: Stop waits for listeners to take the final event.
	s, err := New(soloConfig(t), WithListener(func(ev dledger.RoleEvent) {
		if ev.Role == protocol.UNKNOWN {
			close(entered)
			<-release
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s, protocol.LEADER)
	first := make(chan error, 1)
	go func() { first <- s.Stop(context.Background()) }()
	select {
	case <-entered:
	case <-time.After(electionLimit):
		t.Fatal("first Stop never published the final event")
	}
	second := make(chan error, 1)
	go func() { second <- s.Stop(context.Background()) }()
	select {
	case err := <-second:
		t.Fatalf("second Stop returned (%v) while the first was still stopping", err)
	case <-time.After(300 * time.Millisecond): // long enough for a Stop that does not wait to return
	}
	close(release)
	if err1, err2 := <-first, <-second; !errors.Is(err2, err1) {
		t.Fatalf("Stop results differ: %v, %v", err1, err2)
	}
	// Once stopped, a later Stop answers the first one's result even with an ended ctx.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop after stopped: %v", err)
	}
}
