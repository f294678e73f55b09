package daemon

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
)

// encoding/json matches keys case-insensitively; the API promises 400 for unknown fields, and
// a misspelt key is one.
func TestAdminAPIRejectsMisspeltKeys(t *testing.T) {
	c := soloConfig(t)
	c.Ledger = server.LedgerSidecar
	s := mustMember(t, c, Config{})
	h := s.d.Handler()
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
