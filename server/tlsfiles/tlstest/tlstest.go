// Package tlstest makes the certificates the TLS tests need, at test time (no private key is
// committed): a CA, server certificates for loopback and client certificates signed by it,
// written as PEM files with the modes the member wants (keys 600).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// File is the CA certificate's PEM file (for --trusted-ca-file and --cacert).
	File string
	dir  string
}

// Pair is a certificate and key written to files.
type Pair struct {
	Cert            *x509.Certificate
	CertFile, Key   string
	CertPEM, KeyPEM []byte
}

var serial atomic.Int64

// NewCA makes a CA named name in a temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), dir: t.TempDir()}
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	write(t, ca.File, ca.CertPEM, 0o644)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost, named name.
func (ca *CA) Server(t testing.TB, name string) Pair {
	return ca.issue(t, name, time.Now().Add(24*time.Hour), x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate named name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	return ca.issue(t, name, time.Now().Add(24*time.Hour), x509.ExtKeyUsageClientAuth)
}

// Expired issues a server certificate that expired an hour ago.
func (ca *CA) Expired(t testing.TB, name string) Pair {
	return ca.issue(t, name, time.Now().Add(-time.Hour), x509.ExtKeyUsageServerAuth)
}

func (ca *CA) issue(t testing.TB, name string, notAfter time.Time, usage x509.ExtKeyUsage) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		CertFile: filepath.Join(ca.dir, name+".pem"), Key: filepath.Join(ca.dir, name+"-key.pem")}
	write(t, p.CertFile, p.CertPEM, 0o644)
	write(t, p.Key, p.KeyPEM, 0o600)
	return p
}

// WriteTo writes p's certificate and key to the files certFile and keyFile (a rotation in
// place: the paths a running listener reloads).
func (p Pair) WriteTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	write(t, certFile, p.CertPEM, 0o644)
	write(t, keyFile, p.KeyPEM, 0o600)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// write replaces path's content and sets its mode (WriteFile keeps an existing file's mode).
func write(t testing.TB, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
