package daemon

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// With the gate, a real leader answers 503 on /v1/leader (every method a load balancer uses)
// and "ready": false in /v1/status until the storage calls SetLeaderReady with its term.
func TestLeaderReadyGateHoldsTheHealthRoute(t *testing.T) {
	cfg := soloConfig(t)
	cfg.LeaderReadyGate = true
	s := mustMember(t, cfg, Config{HTTPAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var term int64
	dledgertest.Eventually(t, electionLimit, "the member to lead (as its events say)", func() bool {
		var ok bool
		term, ok = s.LeaderTerm()
		return ok
	})
	base := "http://" + s.HTTPAddr()
	ready := func() *bool {
		t.Helper()
		code, body := get(t, base+"/v1/status")
		var st adminclient.StatusJSON
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("/v1/status: %d %s", code, body)
		}
		return st.Ready
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if code := rawCheck(t, s.HTTPAddr(), m, "/v1/leader"); code != http.StatusServiceUnavailable {
			t.Fatalf("%s /v1/leader on a leader not yet ready: %d, want 503", m, code)
		}
	}
	if r := ready(); r == nil || *r {
		t.Fatalf("/v1/status ready = %v before SetLeaderReady, want false", r)
	}
	if err := s.SetLeaderReady(term - 1); !errors.Is(err, server.ErrNotLeaderOfTerm) {
		t.Fatalf("stale SetLeaderReady(%d): %v", term-1, err)
	}
	if code := rawCheck(t, s.HTTPAddr(), "GET", "/v1/leader"); code != http.StatusServiceUnavailable {
		t.Fatalf("/v1/leader after a refused stale ready: %d", code)
	}
	if err := s.SetLeaderReady(term); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if code := rawCheck(t, s.HTTPAddr(), m, "/v1/leader"); code != http.StatusOK {
			t.Fatalf("%s /v1/leader on a ready leader: %d, want 200", m, code)
		}
	}
	if r := ready(); r == nil || !*r {
		t.Fatalf("/v1/status ready = %v after SetLeaderReady, want true", r)
	}
}

// Without the gate there is no readiness to report: a leader's /v1/status has no "ready" key
// (it used to say "ready": true, which suggested a gate that was not there).
func TestStatusHasNoReadyWithoutTheGate(t *testing.T) {
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	dledgertest.Eventually(t, electionLimit, "the member to lead (as its events say)", func() bool {
		_, ok := s.LeaderTerm()
		return ok
	})
	code, body := get(t, "http://"+s.HTTPAddr()+"/v1/status")
	if code != http.StatusOK || !strings.Contains(body, `"role": "LEADER"`) || strings.Contains(body, `"ready"`) {
		t.Fatalf("/v1/status of a leader without the ready gate: %d %s", code, body)
	}
}

// A member without storage has no ledger to report: UpdateLedger and PUT /v1/ledger say so.
func TestNoStorageModeRefusesLedgerReports(t *testing.T) {
	c := soloConfig(t) // LedgerNone
	s := mustMember(t, c, Config{})
	if err := s.UpdateLedger(1, 1); !errors.Is(err, server.ErrNoStorage) {
		t.Fatalf("UpdateLedger in ledger mode none: %v", err)
	}
	rec := httptest.NewRecorder()
	s.d.Handler().ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/ledger", strings.NewReader(`{"endTerm":1,"endIndex":1}`)))
	if rec.Code != 409 || !strings.Contains(rec.Body.String(), "--ledger sidecar") {
		t.Fatalf("PUT /v1/ledger in ledger mode none: %d %s", rec.Code, rec.Body)
	}
	if st := s.Status(); st.Ledger.Term != -1 || st.Ledger.Index != -1 {
		t.Fatalf("ledger changed: %+v", st.Ledger)
	}
}
