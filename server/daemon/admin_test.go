package daemon

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server"
)

const testToken = "0123456789abcdef-test-token"

func sendWithToken(t *testing.T, method, url, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Mutating admin requests need the bearer token; reads stay open; the read-only listener
// serves no mutating route at all.
func TestAdminTokenGuardsMutatingEndpoints(t *testing.T) {
	c := soloConfig(t)
	c.Ledger = server.LedgerSidecar
	s := mustMember(t, c, Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", AdminToken: testToken})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	admin, ro := "http://"+s.HTTPAddr(), "http://"+s.MetricsAddr()

	for _, tok := range []string{"", "wrong-token-of-enough-length", testToken + "x", strings.ToUpper(testToken)} {
		if code, body := sendWithToken(t, "PUT", admin+"/v1/ledger", `{"endTerm":3,"endIndex":7}`, tok); code != 401 ||
			!strings.Contains(body, "Bearer") {
			t.Errorf("PUT /v1/ledger with token %q: %d %s, want 401", tok, code, body)
		}
		if code, _ := sendWithToken(t, "POST", admin+"/v1/transfer", `{"to":"n0"}`, tok); code != 401 {
			t.Errorf("POST /v1/transfer with token %q: %d, want 401", tok, code)
		}
	}
	if st := s.Status(); st.Ledger.Term != -1 {
		t.Fatalf("a refused PUT changed the ledger: %+v", st.Ledger)
	}
	// The 401 names the header as written (no \u003c escapes) and the way that works for the
	// route: dledger transfer has --token-file; a ledger report has no dledger command.
	_, body := sendWithToken(t, "PUT", admin+"/v1/ledger", `{"endTerm":3,"endIndex":7}`, "")
	if !strings.Contains(body, `Authorization: Bearer <admin token>`) || strings.Contains(body, "dledger transfer") ||
		!strings.Contains(body, "--admin-token-file") {
		t.Errorf("401 of PUT /v1/ledger: %s", body)
	}
	_, body = sendWithToken(t, "POST", admin+"/v1/transfer", `{"to":"n0"}`, "")
	if !strings.Contains(body, "<admin token>") || !strings.Contains(body, "dledger transfer --token-file") {
		t.Errorf("401 of POST /v1/transfer: %s", body)
	}
	if code, body := sendWithToken(t, "PUT", admin+"/v1/ledger", `{"endTerm":3,"endIndex":7}`, testToken); code != 200 {
		t.Fatalf("PUT with the token: %d %s", code, body)
	}
	if st := s.Status(); st.Ledger.Term != 3 || st.Ledger.Index != 7 {
		t.Fatalf("ledger not applied: %+v", st.Ledger)
	}
	for _, path := range []string{"/v1/status", "/healthz", "/metrics"} {
		for _, base := range []string{admin, ro} {
			if code, _ := sendWithToken(t, "GET", base+path, "", ""); code != 200 {
				t.Errorf("GET %s%s without a token: %d", base, path, code)
			}
		}
	}
	for _, r := range []struct{ method, path, body string }{{"PUT", "/v1/ledger", `{"endTerm":4,"endIndex":8}`},
		{"POST", "/v1/transfer", `{"to":"n0"}`}} {
		if code, _ := sendWithToken(t, r.method, ro+r.path, r.body, testToken); code == 200 || code == 401 {
			t.Errorf("%s %s on the read-only listener: %d, want it not served", r.method, r.path, code)
		}
	}
	if st := s.Status(); st.Ledger.Term != 3 {
		t.Fatalf("the read-only listener changed the ledger: %+v", st.Ledger)
	}
}

// An admin address other hosts can reach, with no token, is refused at start; loopback is not.
func TestAdminAddressReachableFromOtherHostsNeedsAToken(t *testing.T) {
	base := Config{InsecureNetworkTrusted: true} // the token's rule; TLS's is TestPlainHTTPReachableFromOtherHostsIsRefused
	for addr, ok := range map[string]bool{"127.0.0.1:9": true, "[::1]:9": true, "localhost:9": true,
		"0.0.0.0:9": false, ":9": false, "[::]:9": false, "10.1.2.3:9": false} {
		c := base
		c.HTTPAddr = addr
		err := c.Validate()
		if ok != (err == nil) {
			t.Errorf("admin address %s without a token: err=%v, want ok=%v", addr, err, ok)
		}
		c.AdminToken = testToken
		if err := c.Validate(); err != nil {
			t.Errorf("admin address %s with a token: %v", addr, err)
		}
	}
	c := base
	c.HTTPAddr, c.AdminToken = "0.0.0.0:9", "short"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("a 5-byte token: %v", err)
	}
}

// Slowloris on the admin port: many connections that never finish their headers are cut off
// by the read-header timeout, the listener's connection bound keeps them from piling up, and
// the member keeps leading at the same term throughout.
func TestAdminSlowlorisDoesNotHurtTheMember(t *testing.T) {
	old := httpReadHeaderTimeout
	httpReadHeaderTimeout = 300 * time.Millisecond
	t.Cleanup(func() { httpReadHeaderTimeout = old })
	c := soloConfig(t)
	s := mustMember(t, c, Config{HTTPAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st := awaitRole(t, s.Server, 3) // LEADER
	var conns []net.Conn
	for i := 0; i < httpMaxConns+50; i++ {
		conn, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: ") // never finished
		conns = append(conns, conn)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Every slow connection is closed by the server within the timeouts (generous bound);
	// the ones past the bound are accepted as earlier ones close.
	deadline := time.Now().Add(30 * time.Second)
	for i, conn := range conns {
		conn.SetReadDeadline(deadline)
		if _, err := io.ReadAll(conn); err != nil {
			t.Fatalf("slow connection %d was not closed by the server: %v", i, err)
		}
	}
	if code, _ := sendWithToken(t, "GET", "http://"+s.HTTPAddr()+"/v1/status", "", ""); code != 200 {
		t.Fatalf("status after the slow clients: %d", code)
	}
	if now := s.Status(); now.Role != st.Role || now.Term != st.Term {
		t.Fatalf("the member changed from %v@%d to %v@%d", st.Role, st.Term, now.Role, now.Term)
	}
}
