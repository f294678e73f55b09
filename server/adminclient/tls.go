package adminclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// HTTPS. A member's listeners serve HTTPS when it has a certificate (its --cert-file); a client
// then asks https://host:port, or a bare host:port with an HTTP client made by HTTPClient, whose
// transport has the TLS config: the addresses the members advertise to each other carry no
// scheme, so `dledger status` dials every member it finds the way it dialled the first.

// HTTPClient is an *http.Client for the member's HTTPS listeners: tlsConfig (from
// tlsfiles.ClientConfig: the CA that signs the members' certificates, and the client
// certificate that writing routes need with --client-cert-auth) on a copy of
// http.DefaultTransport. A Client using it asks bare host:port addresses over HTTPS.
func HTTPClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Transport: Transport(tlsConfig)}
}

// Transport is HTTPClient's transport, for a client that sets its own timeouts.
func Transport(tlsConfig *tls.Config) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsConfig
	return httpsTransport{t}
}

// HTTPSTransport marks t (whose TLSClientConfig the caller set) as Transport's are marked: a
// Client using it asks bare host:port addresses over HTTPS. For a caller that needs transport
// settings of its own (dledger watch's timeouts).
func HTTPSTransport(t *http.Transport) http.RoundTripper { return httpsTransport{t} }

// httpsTransport marks a transport made by Transport: a Client using it asks bare host:port
// addresses over HTTPS. The mark is the type, not a non-nil TLSClientConfig, because net/http
// sets TLSClientConfig on any transport it configures for HTTP/2 at its first request (a plain
// client would turn to HTTPS after one call, and the read would race with that write).
type httpsTransport struct{ *http.Transport }

// usesTLS reports whether a bare host:port is asked over HTTPS: the HTTP client's transport
// was made by Transport (HTTPClient).
func (c *Client) usesTLS() bool {
	if c.HTTP == nil {
		return false
	}
	_, ok := c.HTTP.Transport.(httpsTransport)
	return ok
}

// do sends req, saying what to do about an error that is about TLS.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, explainTLS(err)
	}
	return resp, nil
}

// explainTLS adds the likely fix to a TLS failure; other errors are returned as they are. The
// error stays the same for errors.Is and errors.As.
func explainTLS(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	msg := err.Error()
	hint := ""
	switch {
	case errors.As(err, &unknownCA):
		hint = "the member's certificate is not signed by a CA this client trusts: give the CA that signs the members' " +
			"certificates with --cacert FILE"
	case errors.As(err, &hostname):
		hint = "the member's certificate is not for this address: ask it by a name or IP address its certificate lists"
	case errors.As(err, &invalid):
		hint = "the member's certificate is not valid now (expired, or not yet valid)"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		hint = "the member serves plain HTTP on this address: ask it with http:// and without --cacert, --cert and --key"
	case strings.Contains(msg, "remote error: tls: bad certificate"), strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: certificate required"):
		// The member's alert (an unexported type of crypto/tls over TCP: only its text is there).
		hint = "the member refused this client's certificate: --cert must be signed by the member's --trusted-ca-file CA"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// plainToHTTPS is the message of the 400 a Go HTTPS server answers a plain HTTP request with.
const plainToHTTPS = "Client sent an HTTP request to an HTTPS server"
