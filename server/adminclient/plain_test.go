package adminclient

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A client whose transport is a plain *http.Transport asks a bare host:port over HTTP, also
// after its first request: net/http gives such a transport a TLS config of its own when it
// sets it up for HTTP/2, which must not turn the client to HTTPS (usesTLS looks at the type
// Transport makes, not at TLSClientConfig).
func TestPlainTransportStaysPlainAfterItsFirstRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	c := &Client{Addr: strings.TrimPrefix(srv.URL, "http://"),
		HTTP: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	for i := 0; i < 2; i++ {
		u := c.URL("/v1/status")
		if !strings.HasPrefix(u, "http://") {
			t.Fatalf("request %d: %s, want http:// for a plain transport", i, u)
		}
		resp, err := c.HTTP.Get(u)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if !(&Client{Addr: "127.0.0.1:1", HTTP: HTTPClient(nil)}).usesTLS() {
		t.Fatal("a client made by HTTPClient asks a bare host:port over HTTP")
	}
}
