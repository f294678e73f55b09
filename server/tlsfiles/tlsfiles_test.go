package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

// servedSerial handshakes with a listener served by s and returns the serial of the
// certificate it presented, verified against ca.
func servedSerial(t *testing.T, s *Store, ca *tlstest.CA) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		done <- err
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	serial := c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return serial
}

// A reload serves the new pair to the next handshake, with no new listener; a bad pair on
// reload keeps the old one serving and the error says why and what is kept.
func TestReloadSwapsTheServedCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first.WriteTo(t, certFile, keyFile)
	s, err := Load(Files{Cert: certFile, Key: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, s, ca); got != first.Cert.SerialNumber.String() {
		t.Fatalf("served serial %s, want the first's %s", got, first.Cert.SerialNumber)
	}
	second.WriteTo(t, certFile, keyFile)
	if got := servedSerial(t, s, ca); got != first.Cert.SerialNumber.String() {
		t.Fatalf("before the reload: served %s, want still the first's %s", got, first.Cert.SerialNumber)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, s, ca); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the reload: served %s, want the second's %s", got, second.Cert.SerialNumber)
	}
	// A rotation caught half-way: the new certificate is there, its key not yet.
	third := ca.Server(t, "third")
	if err := os.WriteFile(certFile, third.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), "private key does not match public key") ||
		!strings.Contains(err.Error(), `still serving the certificate loaded at`) || !strings.Contains(err.Error(), "CN=second") {
		t.Fatalf("half-done rotation: %v", err)
	}
	if got := servedSerial(t, s, ca); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after a failed reload: served %s, want still the second's %s", got, second.Cert.SerialNumber)
	}
	if s.Leaf().SerialNumber.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("Leaf is %s", s.Leaf().Subject)
	}
}

// Bad files are refused at load with the file and the reason.
func TestLoadRefusesBadFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	good, other := ca.Server(t, "good"), ca.Server(t, "other")
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose-key.pem")
	if err := os.WriteFile(loose, good.KeyPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expired := ca.Expired(t, "old")
	for _, c := range []struct {
		name  string
		files Files
		want  string
	}{
		{"no cert", Files{Key: good.Key}, "given without its certificate file"},
		{"no key", Files{Cert: good.CertFile}, "given without its key file"},
		{"missing cert", Files{Cert: filepath.Join(dir, "none.pem"), Key: good.Key}, "certificate file: open"},
		{"missing key", Files{Cert: good.CertFile, Key: filepath.Join(dir, "none.pem")}, "key file: open"},
		{"key is a directory", Files{Cert: good.CertFile, Key: dir}, "is not a regular file"},
		{"key readable by others", Files{Cert: good.CertFile, Key: loose}, "readable by group or others (mode 0644): chmod 600"},
		{"mismatched pair", Files{Cert: good.CertFile, Key: other.Key}, "private key does not match public key"},
		{"cert not PEM", Files{Cert: notPEM, Key: good.Key}, "failed to find any PEM data in certificate input"},
		{"expired", Files{Cert: expired.CertFile, Key: expired.Key}, "expired at"},
		{"CA not PEM", Files{Cert: good.CertFile, Key: good.Key, CA: notPEM}, "holds no PEM certificate"},
		{"missing CA", Files{Cert: good.CertFile, Key: good.Key, CA: filepath.Join(dir, "none.pem")}, "CA file: open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v, want an error with %q", err, c.want)
			}
		})
	}
	if _, err := Load(Files{Cert: good.CertFile, Key: good.Key, CA: ca.File}); err != nil {
		t.Fatalf("good files: %v", err)
	}
}

// With a CA, a client certificate is verified when presented and optional otherwise (the
// HTTP layer decides which routes need one); one from another CA fails the handshake.
func TestClientCertificateOptionalButVerified(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "admin"), tlstest.NewCA(t, "rogue")
	srv := ca.Server(t, "srv")
	s, err := Load(Files{Cert: srv.CertFile, Key: srv.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	chains := make(chan int, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				chains <- len(tc.ConnectionState().VerifiedChains)
			} else {
				chains <- -1
			}
			c.Close()
		}
	}()
	dial := func(cfg *tls.Config) int {
		conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			// TLS 1.3: the server's verdict on the client certificate comes after the
			// client's handshake; a read sees it.
			conn.Read(make([]byte, 1))
			conn.Close()
		}
		return <-chains
	}
	base, err := ClientConfig(ca.File, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := dial(base); n != 0 {
		t.Fatalf("no client certificate: %d verified chains, want 0 (accepted)", n)
	}
	ops := ca.Client(t, "ops")
	withCert, err := ClientConfig(ca.File, ops.CertFile, ops.Key)
	if err != nil {
		t.Fatal(err)
	}
	if n := dial(withCert); n != 1 {
		t.Fatalf("our client certificate: %d verified chains, want 1", n)
	}
	evil := rogue.Client(t, "evil")
	withRogue, err := ClientConfig(ca.File, evil.CertFile, evil.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Go's client offers only a certificate of a CA the server names, so it sends none...
	if n := dial(withRogue); n != 0 {
		t.Fatalf("another CA's client certificate: %d verified chains, want 0 (not offered)", n)
	}
	// ...and a client that sends it anyway fails the handshake.
	rogueCert := withRogue.Certificates[0]
	withRogue.Certificates = nil
	withRogue.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogueCert, nil }
	if n := dial(withRogue); n != -1 {
		t.Fatalf("another CA's client certificate, forced: %d, want a failed handshake", n)
	}
	// The client side refuses a mismatched pair before dialling.
	if _, err := ClientConfig(ca.File, ops.CertFile, evil.Key); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("mismatched client pair: %v", err)
	}
}
