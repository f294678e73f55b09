package main

import (
	"flag"
	"fmt"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/server/tlsfiles"
)

// serverTLSFlags are the admin and metrics listeners' TLS, named as etcd's client TLS flags
// (--key-file is the group key here, so the certificate's key is --cert-key-file).
type serverTLSFlags struct {
	certFile, keyFile, trustedCA *string
	clientCertAuth               *clientCertAuthFlag
	insecureNetTrust             *bool
}

// clientCertAuthFlag is --client-cert-auth: alone (or true, writes) the admin API's writing
// routes need a client certificate; all: every route of both listeners does; false: none.
type clientCertAuthFlag struct{ writes, all bool }

func (f *clientCertAuthFlag) String() string {
	switch {
	case f == nil || !f.writes:
		return "false"
	case f.all:
		return "all"
	}
	return "true"
}

func (f *clientCertAuthFlag) Set(s string) error {
	switch s {
	case "true", "writes":
		*f = clientCertAuthFlag{writes: true}
	case "all":
		*f = clientCertAuthFlag{writes: true, all: true}
	case "false":
		*f = clientCertAuthFlag{}
	default:
		return fmt.Errorf("%q: want true (writes), all or false", s)
	}
	return nil
}

// IsBoolFlag lets --client-cert-auth stand alone, as etcd's does.
func (f *clientCertAuthFlag) IsBoolFlag() bool { return true }

// addServerTLSFlags adds the server's TLS flags to fs.
func addServerTLSFlags(fs *flag.FlagSet) serverTLSFlags {
	var f serverTLSFlags
	f.certFile = fs.String("cert-file", "", "TLS certificate (PEM, its chain after it) of the admin API and --metrics "+
		"listeners: both serve HTTPS; re-read on SIGHUP")
	f.keyFile = fs.String("cert-key-file", "", "private key of --cert-file (PEM, mode 600)")
	f.trustedCA = fs.String("trusted-ca-file", "", "CA certificates (PEM) that client certificates must be signed by; "+
		"with it a client certificate presented is verified")
	f.clientCertAuth = &clientCertAuthFlag{}
	fs.Var(f.clientCertAuth, "client-cert-auth", "the admin API's writing routes (transfer, ledger, members, drain) "+
		"need a client certificate signed by --trusted-ca-file, besides --admin-token-file's token if set; reads stay open "+
		"(--client-cert-auth=all: every route of both listeners, reads and /metrics too)")
	f.insecureNetTrust = fs.Bool("insecure-network-trusted", false, "let --http or --metrics on an address other hosts "+
		"can reach serve plain HTTP (without it such an address needs --cert-file): the network carries tokens and status in clear text")
	return f
}

// resolveServerTLS loads the admin and metrics listeners' certificate (refusing bad files now,
// with exit status 2, rather than at the first handshake) and registers its reloader.
func resolveServerTLS(su *serverSetup, f serverTLSFlags, from func(string) string) error {
	su.daemon.ClientCertAuth, su.daemon.ClientCertAuthReads = f.clientCertAuth.writes, f.clientCertAuth.all
	su.daemon.InsecureNetworkTrusted = *f.insecureNetTrust
	if *f.certFile == "" && *f.keyFile == "" {
		if *f.trustedCA != "" {
			return fmt.Errorf("%s needs %s and %s: client certificates are verified by the TLS listeners",
				from("trusted-ca-file"), from("cert-file"), from("cert-key-file"))
		}
		return nil
	}
	store, err := tlsfiles.Load(tlsfiles.Files{Cert: *f.certFile, Key: *f.keyFile, CA: *f.trustedCA})
	if err != nil {
		return fmt.Errorf("admin TLS (%s, %s): %v", from("cert-file"), from("cert-key-file"), err)
	}
	su.daemon.TLS = store
	log := su.log
	su.reloaders = append(su.reloaders, reloader{name: "admin TLS certificate", reload: func() error {
		if err := store.Reload(); err != nil {
			return err
		}
		leaf := store.Leaf()
		log.Info("admin TLS certificate reloaded", zap.String("subject", leaf.Subject.String()),
			zap.Time("notAfter", leaf.NotAfter), zap.String("serial", leaf.SerialNumber.String()))
		return nil
	}})
	return nil
}
