// Package tlsfiles loads the PEM files of the admin and metrics listeners' TLS (a certificate,
// its private key and, for client certificates, a CA) and of the clients that talk to them, with
// the checks an operator needs at start rather than at the first handshake: the key file is
// private (mode 600, like the group key and the admin token), the certificate matches its key
// and has not expired, the CA file holds at least one certificate. A Store keeps the latest
// good set and swaps in a new one on Reload (SIGHUP): a bad set on reload leaves the old one
// serving and says why, and connections already open keep what they were handshaken with.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// maxFileSize bounds every PEM file read: a certificate chain is a few kilobytes, a CA bundle
// (a distribution's whole trust store) a few hundred.
const maxFileSize = 1 << 20

// Files names a listener's PEM files. Cert and Key are both required; CA is optional: with it,
// a client certificate presented is verified against it (and the admin API's writing routes can
// require one: daemon.Config.ClientCertAuth).
type Files struct {
	Cert, Key, CA string
}

// Store serves the latest good set loaded from its Files to every new TLS connection.
type Store struct {
	files Files
	now   func() time.Time // time.Now; tests move it
	cur   atomic.Pointer[loaded]
}

// loaded is one good set: the server's config built from it (returned to each new connection),
// and the leaf certificate, for logs and tests.
type loaded struct {
	cfg  *tls.Config
	leaf *x509.Certificate
	at   time.Time
}

// Load reads and checks files; the error names the file and the reason.
func Load(files Files) (*Store, error) {
	s := &Store{files: files, now: time.Now}
	l, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(l)
	return s, nil
}

// Reload reads the files again. If they are good, new connections get them from now on; if not,
// the set loaded before keeps serving and the error says why (and that it was kept).
func (s *Store) Reload() error {
	l, err := s.load()
	if err != nil {
		old := s.cur.Load()
		return fmt.Errorf("%w; still serving the certificate loaded at %s (subject %q, expires %s)", err,
			old.at.UTC().Format(time.RFC3339), old.leaf.Subject.String(), old.leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	s.cur.Store(l)
	return nil
}

// Leaf is the certificate new connections are served.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }

// HasCA reports whether client certificates are verified (Files.CA was given).
func (s *Store) HasCA() bool { return s.files.CA != "" }

// ServerConfig is the listener's config: each handshake takes the latest good set (so a reload
// needs no new listener), TLS 1.2 at least, and with a CA a client certificate verified if the
// client presents one. Whether a route needs one is the HTTP layer's business: the reads stay
// open to any TLS client.
func (s *Store) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().cfg, nil
		},
	}
}

// load reads every file once and builds the set.
func (s *Store) load() (*loaded, error) {
	pair, leaf, err := loadKeyPair(s.files.Cert, s.files.Key, s.now())
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if s.files.CA != "" {
		pool, err := LoadCAPool(s.files.CA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return &loaded{cfg: cfg, leaf: leaf, at: s.now()}, nil
}

// LoadKeyPair reads a certificate (chain) and its private key, checked as Load checks them: a
// client's --cert and --key for client-certificate authentication.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	pair, _, err := loadKeyPair(certFile, keyFile, time.Now())
	return pair, err
}

func loadKeyPair(certFile, keyFile string, now time.Time) (tls.Certificate, *x509.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return tls.Certificate{}, nil, errors.New("no certificate and key files given")
	case certFile == "":
		return tls.Certificate{}, nil, fmt.Errorf("key file %s given without its certificate file", keyFile)
	case keyFile == "":
		return tls.Certificate{}, nil, fmt.Errorf("certificate file %s given without its key file", certFile)
	}
	certPEM, err := readFile(certFile, "certificate", false)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := readFile(keyFile, "key", true)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	leaf := pair.Leaf // parsed by X509KeyPair since Go 1.23
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("certificate %s: %w", certFile, err)
		}
	}
	if now.After(leaf.NotAfter) {
		return tls.Certificate{}, nil, fmt.Errorf("certificate %s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return pair, leaf, nil
}

// LoadCAPool reads a PEM bundle of CA certificates; a file holding none is refused (a typo'd
// path to the wrong file would otherwise trust nothing and fail every handshake later).
func LoadCAPool(path string) (*x509.CertPool, error) {
	b, err := readFile(path, "CA", false)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// readFile reads a PEM file of at most maxFileSize bytes. A private key must be a regular file
// that neither group nor others can read: whoever reads it can pose as this listener.
func readFile(path, what string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, so it cannot be swapped after the check
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s file %s is not a regular file", what, path)
	}
	if perm := fi.Mode().Perm(); private && perm&0o077 != 0 {
		return nil, fmt.Errorf("%s file %s is readable by group or others (mode %04o): chmod 600 %s", what, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s file %s is larger than %d bytes", what, path, maxFileSize)
	}
	return b, nil
}

// ClientConfig is a client's side (dledger status, transfer, watch, groups): caFile, if set,
// is the CA the member's certificate must be signed by (else the system's roots); certFile and
// keyFile, if set, are the client certificate that the admin API's writing routes ask for with
// --client-cert-auth.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCAPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		pair, err := LoadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
