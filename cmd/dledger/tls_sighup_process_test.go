package main

import (
	"crypto/tls"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/tlsfiles"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

// A real process swaps the certificate its admin listener serves on SIGHUP: the TLS reloader
// (server_tls.go) is among the ones the SIGHUP loop (reload_loop.go) runs.
func TestSIGHUPReloadsTheAdminCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "members")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Server(t, "before").WriteTo(t, certFile, keyFile)
	g := newProcGroup(t, 1, "--cert-file", certFile, "--cert-key-file", keyFile)
	g.start(0)
	cfg, _ := tlsfiles.ClientConfig(ca.File, "", "")
	served := func() string {
		c, err := tls.Dial("tcp", g.https[0], cfg)
		if err != nil {
			return ""
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	dledgertest.Eventually(t, 20*time.Second, "serving before", func() bool { return served() == "before" })
	ca.Server(t, "after").WriteTo(t, certFile, keyFile)
	if err := g.procs[0].Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	dledgertest.Eventually(t, 20*time.Second, "serving after", func() bool { return served() == "after" })
	if g.procs[0].ProcessState != nil {
		t.Fatal("exited")
	}
}
