package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
	"github.com/dledger-go/dledger/server/tlsfiles"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

// tlsStore loads a server certificate of ca (and ca itself for client certificates when
// withCA) into a Store.
func tlsStore(t *testing.T, ca *tlstest.CA, withCA bool) *tlsfiles.Store {
	t.Helper()
	p := ca.Server(t, "member")
	f := tlsfiles.Files{Cert: p.CertFile, Key: p.Key}
	if withCA {
		f.CA = ca.File
	}
	s, err := tlsfiles.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// httpsClient trusts ca and presents client, if given.
func httpsClient(t *testing.T, ca *tlstest.CA, client *tlstest.Pair) *http.Client {
	t.Helper()
	var cert, key string
	if client != nil {
		cert, key = client.CertFile, client.Key
	}
	cfg, err := tlsfiles.ClientConfig(ca.File, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c := adminclient.HTTPClient(cfg)
	c.Timeout = 10 * time.Second
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func do(t *testing.T, c *http.Client, method, url, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Both listeners speak HTTPS with the configured certificate: status, the watch stream and
// /metrics through adminclient with the CA, and clear errors for a client without the CA, a
// plain HTTP client, and an HTTPS client at a plain HTTP member.
func TestAdminAndMetricsOverHTTPS(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", TLS: tlsStore(t, ca, false)})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	client := httpsClient(t, ca, nil)
	ctx := context.Background()
	for _, addr := range []string{s.HTTPAddr(), "https://" + s.MetricsAddr()} {
		c := &adminclient.Client{Addr: addr, HTTP: client}
		if !strings.HasPrefix(c.URL("/v1/status"), "https://") {
			t.Fatalf("%s: URL %s, want https", addr, c.URL("/v1/status"))
		}
		st, err := c.Status(ctx)
		if err != nil || st.SelfID != "n0" {
			t.Fatalf("status over HTTPS at %s: %+v, %v", addr, st, err)
		}
		wctx, cancel := context.WithTimeout(ctx, electionLimit)
		stream, err := c.Watch(wctx, adminclient.WatchOptions{})
		if err != nil {
			t.Fatalf("watch over HTTPS at %s: %v", addr, err)
		}
		if ev, err := stream.Next(); err != nil || ev.Role.Seq == 0 {
			t.Fatalf("watch over HTTPS at %s: first event %+v, %v", addr, ev, err)
		}
		stream.Close()
		cancel()
	}
	if code, body := do(t, client, "GET", "https://"+s.MetricsAddr()+"/metrics", "", ""); code != 200 || !strings.Contains(body, "dledger_") {
		t.Fatalf("/metrics over HTTPS: %d", code)
	}
	// A client that does not trust the CA: the handshake fails, and the error says what to give.
	other := tlstest.NewCA(t, "other")
	_, err := (&adminclient.Client{Addr: s.HTTPAddr(), HTTP: httpsClient(t, other, nil)}).Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "--cacert FILE") {
		t.Fatalf("status with another CA: %v", err)
	}
	// Plain HTTP at the HTTPS listener: Go's server answers 400, which the client explains.
	_, err = (&adminclient.Client{Addr: "http://" + s.HTTPAddr(), HTTP: &http.Client{Timeout: 5 * time.Second}}).Status(ctx)
	var he *adminclient.HTTPError
	if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Message, "the member serves HTTPS: ask it at https://") {
		t.Fatalf("plain HTTP at the HTTPS listener: %v", err)
	}
	// HTTPS at a plain HTTP member.
	plain := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0"})
	_, err = (&adminclient.Client{Addr: plain.HTTPAddr(), HTTP: client}).Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "the member serves plain HTTP") {
		t.Fatalf("HTTPS at a plain member: %v", err)
	}
}

// With ClientCertAuth every writing route, on both path forms, refuses a request without a
// client certificate signed by the CA (403) before its own checks, while the reads stay open to
// any TLS client; with the certificate, the bearer token is still required.
func TestWritesNeedAClientCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	c := soloConfig(t)
	c.Ledger = server.LedgerSidecar
	s := mustMember(t, c, Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", AdminToken: testToken,
		TLS: tlsStore(t, ca, true), ClientCertAuth: true})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := "https://" + s.HTTPAddr()
	writesRoutes := []struct{ method, path, body string }{
		{"PUT", "/v1/ledger", `{"endTerm":1,"endIndex":2}`},
		{"POST", "/v1/transfer", `{"to":"n1"}`},
		{"PUT", "/v1/groups/g/n0/ledger", `{"endTerm":1,"endIndex":2}`},
		{"POST", "/v1/groups/g/n0/transfer", `{"to":"n1"}`},
		{"PUT", "/v1/groups/g2/n0", `{"peers":"n0-127.0.0.1:1"}`},
		{"DELETE", "/v1/groups/g/n0", ""},
		{"POST", "/v1/drain", ""},
		{"POST", "/v1/undrain", ""},
		{"POST", "/v1/no-such-route", ""}, // refused before routing: a route added later is covered
	}
	rogue := tlstest.NewCA(t, "rogue").Client(t, "evil")
	for name, client := range map[string]*http.Client{"no certificate": httpsClient(t, ca, nil),
		"another CA's certificate": httpsClient(t, ca, &rogue)} {
		for _, r := range writesRoutes {
			code, body := do(t, client, r.method, base+r.path, r.body, testToken)
			if code != http.StatusForbidden || !strings.Contains(body, "--cert FILE --key FILE") {
				t.Errorf("%s: %s %s = %d %s, want 403 naming --cert", name, r.method, r.path, code, body)
			}
		}
		for _, path := range []string{"/v1/status", "/v1/groups", "/v1/members", "/v1/groups/g/n0/status", "/healthz"} {
			if code, body := do(t, client, "GET", base+path, "", ""); code != 200 {
				t.Errorf("%s: GET %s = %d %s, want the read served", name, path, code, body)
			}
		}
		if code, _ := do(t, client, "GET", "https://"+s.MetricsAddr()+"/metrics", "", ""); code != 200 {
			t.Errorf("%s: GET /metrics on the read-only listener = %d", name, code)
		}
	}
	if st := s.Status(); st.Ledger.Term == 1 {
		t.Fatalf("a refused request changed the ledger: %+v", st.Ledger)
	}
	ops := ca.Client(t, "ops")
	withCert := httpsClient(t, ca, &ops)
	if code, body := do(t, withCert, "PUT", base+"/v1/ledger", `{"endTerm":1,"endIndex":2}`, ""); code != http.StatusUnauthorized {
		t.Fatalf("client certificate without the token: %d %s, want 401", code, body)
	}
	if code, body := do(t, withCert, "PUT", base+"/v1/ledger", `{"endTerm":1,"endIndex":2}`, testToken); code != 200 {
		t.Fatalf("client certificate and token: %d %s", code, body)
	}
	if st := s.Status(); st.Ledger.Term != 1 || st.Ledger.Index != 2 {
		t.Fatalf("the accepted report did not land: %+v", st.Ledger)
	}
	// adminclient's Transfer with the certificate reaches the member (which refuses for its own
	// reason: n1 is no member), and without it is refused for the certificate.
	tok := &adminclient.Client{Addr: s.HTTPAddr(), HTTP: withCert, Token: testToken}
	if res, err := tok.Transfer(context.Background(), "n1"); res.Code == "" || !errors.Is(err, adminclient.ErrRefused) {
		t.Fatalf("transfer with the certificate: %+v, %v (want the member's own refusal)", res, err)
	}
	tok.HTTP = httpsClient(t, ca, nil)
	var te *adminclient.TransferError
	if _, err := tok.Transfer(context.Background(), "n1"); !errors.As(err, &te) || te.Status != http.StatusForbidden {
		t.Fatalf("transfer without the certificate: %v", err)
	}
}

// A reload of the files swaps the certificate the admin listener serves to new connections; a
// bad pair keeps the old one.
func TestAdminListenerServesTheReloadedCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	first := ca.Server(t, "first")
	first.WriteTo(t, certFile, keyFile)
	store, err := tlsfiles.Load(tlsfiles.Files{Cert: certFile, Key: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0", TLS: store})
	served := func() string {
		t.Helper()
		cfg, err := tlsfiles.ClientConfig(ca.File, "", "")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", s.HTTPAddr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	ca.Server(t, "second").WriteTo(t, certFile, keyFile)
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "second" {
		t.Fatalf("after the reload: served %q, want second", got)
	}
	ca.Server(t, "third").WriteTo(t, certFile, keyFile)
	first.WriteTo(t, filepath.Join(dir, "unused.crt"), keyFile) // the third's key replaced by another
	if err := store.Reload(); err == nil {
		t.Fatal("a mismatched pair was reloaded")
	}
	if got := served(); got != "second" {
		t.Fatalf("after a failed reload: served %q, want still second", got)
	}
}

// A listener other hosts can reach must serve TLS unless the network is said to be trusted;
// client certificates need TLS with a CA.
func TestPlainHTTPReachableFromOtherHostsIsRefused(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	withTLS, withCA := tlsStore(t, ca, false), tlsStore(t, ca, true)
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" ok
	}{
		{"loopback admin and metrics", Config{HTTPAddr: "127.0.0.1:1", MetricsAddr: "[::1]:2"}, ""},
		{"public admin, plain", Config{HTTPAddr: "0.0.0.0:1", AdminToken: testToken}, `admin address "0.0.0.0:1" (--http) can be reached`},
		{"public metrics, plain", Config{MetricsAddr: "10.1.2.3:2"}, `metrics address "10.1.2.3:2" (--metrics) can be reached`},
		{"public metrics, trusted", Config{MetricsAddr: "10.1.2.3:2", InsecureNetworkTrusted: true}, ""},
		{"public both, TLS", Config{HTTPAddr: ":1", MetricsAddr: ":2", AdminToken: testToken, TLS: withTLS}, ""},
		{"public admin, TLS, no token", Config{HTTPAddr: ":1", TLS: withTLS}, "give it a token"},
		{"public admin, client certificates instead of a token", Config{HTTPAddr: ":1", TLS: withCA, ClientCertAuth: true}, ""},
		{"client certificates without a CA", Config{HTTPAddr: "127.0.0.1:1", TLS: withTLS, ClientCertAuth: true}, "--trusted-ca-file"},
		{"client certificates without TLS", Config{HTTPAddr: "127.0.0.1:1", ClientCertAuth: true}, "--trusted-ca-file"},
		{"client certificates for everything without a CA", Config{HTTPAddr: "127.0.0.1:1", TLS: withTLS, ClientCertAuthReads: true}, "--trusted-ca-file"},
		{"public admin, client certificates for everything", Config{HTTPAddr: ":1", TLS: withCA, ClientCertAuthReads: true}, ""},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		case c.want != "" && strings.Contains(c.want, "can be reached") && !strings.Contains(err.Error(), "--insecure-network-trusted"):
			t.Errorf("%s: %v does not name --insecure-network-trusted", c.name, err)
		}
	}
	if _, err := New(Config{HTTPAddr: "0.0.0.0:0", AdminToken: testToken}); err == nil {
		t.Fatal("New took a public plain-HTTP admin address")
	}
}

// A client that opens a TLS connection and never finishes its handshake is cut off by the
// listener's read-header timeout, as a slow plain-HTTP client is: the handshake holds a
// connection slot only that long.
func TestStalledTLSHandshakeIsCutOff(t *testing.T) {
	old := httpReadHeaderTimeout
	httpReadHeaderTimeout = 300 * time.Millisecond
	t.Cleanup(func() { httpReadHeaderTimeout = old })
	ca := tlstest.NewCA(t, "admin")
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0", TLS: tlsStore(t, ca, false)})
	conn, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}) // a ClientHello record header, then nothing
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the stalled handshake was not closed by the server: %v", err)
	}
	// The listener still serves. The 300 ms read-header timeout holds for this client too: under
	// -race on a loaded machine its own handshake and request took longer once ("server closed
	// idle connection"), so it may take more than one try; a listener that stopped serving
	// still fails after electionLimit.
	cl := &adminclient.Client{Addr: s.HTTPAddr(), HTTP: httpsClient(t, ca, nil)}
	dledgertest.Eventually(t, electionLimit, "a status over TLS after the stalled handshake", func() bool {
		_, err := cl.Status(context.Background())
		return err == nil
	})
}

// With ClientCertAuthReads every route of both listeners, the reads, health routes and /metrics
// included, refuses a client without a certificate signed by the CA, and serves one with it.
func TestEveryRouteNeedsAClientCertificateWhenConfigured(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	reg := prometheus.NewRegistry()
	d, err := New(Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", TLS: tlsStore(t, ca, true), ClientCertAuthReads: true},
		WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(soloConfig(t), server.WithAttacher(d.Attacher()), server.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	d.Serve()
	t.Cleanup(func() { s.Stop(context.Background()); d.Stop(context.Background()) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ops := ca.Client(t, "ops")
	without, with := httpsClient(t, ca, nil), httpsClient(t, ca, &ops)
	for _, url := range []string{"https://" + d.HTTPAddr() + "/v1/status", "https://" + d.HTTPAddr() + "/healthz",
		"https://" + d.MetricsAddr() + "/v1/status", "https://" + d.MetricsAddr() + "/metrics", "https://" + d.MetricsAddr() + "/readyz"} {
		if code, body := do(t, without, "GET", url, "", ""); code != http.StatusForbidden || !strings.Contains(body, "serves only clients with") {
			t.Errorf("GET %s without a client certificate: %d %s, want 403", url, code, body)
		}
		if code, body := do(t, with, "GET", url, "", ""); code == http.StatusForbidden {
			t.Errorf("GET %s with a client certificate: %d %s", url, code, body)
		}
	}
	if code, body := do(t, without, "POST", "https://"+d.HTTPAddr()+"/v1/transfer", `{"to":"n1"}`, ""); code != http.StatusForbidden ||
		!strings.Contains(body, "changes the election") {
		t.Errorf("a write without a client certificate: %d %s", code, body)
	}
}
