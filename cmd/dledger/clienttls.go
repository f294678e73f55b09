package main

import (
	"crypto/tls"
	"flag"
	"net/http"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
	"github.com/dledger-go/dledger/server/tlsfiles"
)

// clientTLSFlags are the admin clients' TLS flags, named as etcdctl's: --cacert verifies the
// members' certificates, --cert and --key are the client certificate that a member with
// --client-cert-auth wants on its writing routes. With any of them a host:port address (given,
// or advertised by the members) is asked over HTTPS; an https:// address always is.
type clientTLSFlags struct {
	cacert, cert, key *string
}

func addClientTLSFlags(fs *flag.FlagSet) clientTLSFlags {
	return clientTLSFlags{
		cacert: fs.String("cacert", "", "CA certificate (PEM) the members' HTTPS certificates are signed by (their "+
			"--cert-file's CA); with it, host:port addresses are asked over HTTPS"),
		cert: fs.String("cert", "", "client certificate (PEM) for a member with --client-cert-auth"),
		key:  fs.String("key", "", "private key of --cert (PEM, mode 600)"),
	}
}

// config is the TLS config the flags give, or nil when none is set.
func (f clientTLSFlags) config() (*tls.Config, error) {
	if *f.cacert == "" && *f.cert == "" && *f.key == "" {
		return nil, nil
	}
	return tlsfiles.ClientConfig(*f.cacert, *f.cert, *f.key)
}

// httpClient is an HTTP client with timeout, over HTTPS when a TLS flag is set.
func (f clientTLSFlags) httpClient(timeout time.Duration) (*http.Client, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: timeout}
	if cfg != nil {
		c.Transport = adminclient.Transport(cfg)
	}
	return c, nil
}
