package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
	rr := httptest.NewRecorder()
	s.AdminHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/v1/leader", nil))
	if rr.Code != http.StatusServiceUnavailable {
		t.Fatalf("/v1/leader after Stop: %d %s, want 503", rr.Code, rr.Body)
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

// encoding/json matches keys case-insensitively; the API promises 400 for unknown fields, and
// a misspelt key is one.
func TestAdminAPIRejectsMisspeltKeys(t *testing.T) {
	c := soloConfig(t)
	c.Ledger = LedgerSidecar
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	h := s.AdminHandler()
	do := func(method, path, body string) (int, string) {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rr.Code, rr.Body.String()
	}
	for _, bad := range []string{`{"endterm":1,"endIndex":2}`, `{"endTerm":1,"EndIndex":2}`, `{"ENDTERM":1,"ENDINDEX":2}`,
		`{"endTerm":1,"endIndex":2,"endindex":3}`, `{"endTerm":null,"endIndex":2}`, `null`, `[]`, `{"endTerm":1.5,"endIndex":2}`} {
		if code, body := do("PUT", "/v1/ledger", bad); code != 400 || !strings.Contains(body, `"error"`) {
			t.Errorf("PUT /v1/ledger %s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := do("PUT", "/v1/ledger", `{"endTerm":3,"endIndex":7}`); code != 200 {
		t.Fatalf("good ledger: %d %s", code, body)
	}
	if st := s.Status(); st.Ledger.Term != 3 || st.Ledger.Index != 7 {
		t.Fatalf("ledger not applied: %+v", st.Ledger)
	}
	for _, bad := range []string{`{"To":"n0"}`, `{"TO":"n0"}`, `{"to":"n0","To":"n0"}`, `{"to":"n0","extra":1}`, `{"to":7}`, `null`} {
		if code, body := do("POST", "/v1/transfer", bad); code != 400 {
			t.Errorf("POST /v1/transfer %s: %d %s, want 400", bad, code, body)
		}
	}
	// A body over the limit is too large (413), not malformed: the client must send less.
	big := `{"endTerm":1,"endIndex":2` + strings.Repeat(" ", maxBody) + `}`
	if code, body := do("PUT", "/v1/ledger", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"error"`) {
		t.Errorf("PUT /v1/ledger with a %d-byte body: %d %s, want 413", len(big), code, body)
	}
	if code, body := do("POST", "/v1/transfer", `{"to":"`+strings.Repeat("n", maxBody)+`"}`); code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST /v1/transfer with a large body: %d %s, want 413", code, body)
	}
	// A well-formed request gets past the body check (this member is not leader: 409).
	if code, body := do("POST", "/v1/transfer", `{"to":"n0"}`); code == 400 {
		t.Fatalf("good transfer body refused: %d %s", code, body)
	}
}

// Alive, ledger and lastAck of peers are known only on the leader; anywhere else the JSON
// must not claim every peer is dead with a (0,0) ledger.
func TestStatusJSONShowsLeaderOnlyPeerFieldsOnlyOnTheLeader(t *testing.T) {
	now := time.Unix(1000, 0)
	st := dledger.Status{Group: "g", SelfID: "n0", Term: 4, Peers: []dledger.PeerStatus{
		{ID: "n0", Addr: "a:1", Self: true, Alive: true, Ledger: memberstate.LedgerEnd{Term: 2, Index: 9}, LedgerSet: true},
		{ID: "n1", Addr: "a:2", Alive: true, LastAck: now.Add(-40 * time.Millisecond), Ledger: memberstate.LedgerEnd{Term: 2, Index: 8}, LedgerSet: true},
		{ID: "n2", Addr: "a:3"},
	}}
	leaderOnly := []string{`"alive"`, `"ledgerKnown"`, `"lastAckMsAgo"`}
	for _, role := range []protocol.Role{protocol.FOLLOWER, protocol.CANDIDATE, protocol.UNKNOWN, protocol.LEADER} {
		st.Role = role
		b, err := json.Marshal(toJSON(st, now))
		if err != nil {
			t.Fatal(err)
		}
		peers := string(b[strings.Index(string(b), `"peers"`):])
		for _, key := range append(leaderOnly, `"ledgerEndTerm"`, `"ledgerEndIndex"`) {
			if has := strings.Contains(peers, key); has != (role == protocol.LEADER) {
				t.Errorf("%v: peers contain %s = %v: %s", role, key, has, peers)
			}
		}
		if top := string(b[:strings.Index(string(b), `"peers"`)]); !strings.Contains(top, `"ledgerEndTerm"`) {
			t.Errorf("%v: the member's own ledgerEndTerm is missing: %s", role, b)
		}
	}
	st.Role = protocol.LEADER
	j := toJSON(st, now)
	if p := j.Peers[1]; p.Alive == nil || !*p.Alive || *p.LedgerEndIndex != 8 || *p.LastAckMsAgo != 40 {
		b, _ := json.Marshal(p)
		t.Fatalf("leader's view of n1: %s", b)
	}
	if p := j.Peers[2]; p.Alive == nil || *p.Alive || *p.LastAckMsAgo != -1 {
		b, _ := json.Marshal(p)
		t.Fatalf("leader's view of silent n2: %s", b)
	}
}
