package daemon

import (
	"net/http"

	"go.uber.org/zap"
)

// TLS on the admin and read-only listeners (Config.TLS) and client certificates for writes
// (Config.ClientCertAuth), docs/design.md "The admin surface".

// writes reports whether r may change something. It is a property of the route table, not a
// list of routes: every route whose method is not GET, HEAD or OPTIONS writes (PUT /v1/ledger,
// POST /v1/transfer, PUT and DELETE of a member, POST /v1/drain and /v1/undrain, and whatever
// writing route is added later), and no GET route changes anything (GET /v1/leader?wait only
// waits). A route added with a writing method is covered without being named here.
func writes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// writesNeedClientCert wraps a listener's handler so that, with Config.ClientCertAuth, a
// writing request without a client certificate verified against the CA is refused (403)
// before any route sees it, and with Config.ClientCertAuthReads every request is; the bearer
// token, if configured, is still checked by the route after this.
func (d *Daemon) writesNeedClientCert(h http.Handler) http.Handler {
	if !d.cfg.ClientCertAuth && !d.cfg.ClientCertAuthReads {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (d.cfg.ClientCertAuthReads || writes(r)) && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			d.log.Warn("admin request refused: no client certificate",
				zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
			what := "this request changes the election: it needs"
			if !writes(r) {
				what = "this member serves only clients with" // --client-cert-auth=all
			}
			writeJSON(w, http.StatusForbidden, errorJSON{Error: what + " a client certificate signed by the member's " +
				"--trusted-ca-file CA (dledger status, transfer, watch and groups: --cert FILE --key FILE)"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
