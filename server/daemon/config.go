package daemon

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/dledger-go/dledger/server/tlsfiles"
)

// Config is what the `dledger server` process adds to its members: the HTTP admin API, the
// read-only metrics listener and the hook commands. One Config belongs to one process, whatever
// number of group members it hosts (docs/design.md, "The admin surface").
type Config struct {
	// HTTPAddr is the admin API's listen address ("" disables it). An address other hosts can
	// reach needs an AdminToken (or ClientCertAuth) and TLS (or InsecureNetworkTrusted).
	HTTPAddr string
	// AdminAdvertise, if set, is the admin address the members tell their peers (so
	// `dledger status` can find every member from one), when HTTPAddr binds an address others
	// cannot use as it is (0.0.0.0, a pod IP behind a Service). Empty: the bound admin address.
	AdminAdvertise string
	// AdminToken, if set, must be presented as "Authorization: Bearer <token>" by the admin
	// API's mutating requests (PUT /v1/ledger, POST /v1/transfer, PUT and DELETE of a group
	// member, POST /v1/drain); reads stay open.
	AdminToken string
	// MetricsAddr is a read-only listener for /metrics, the health routes, /v1/status, /v1/watch,
	// /v1/members and /v1/groups ("" disables it), so Prometheus, load balancers and watchers
	// never need the admin address.
	MetricsAddr string
	// OnRoleChange, if set, is a command run with /bin/sh -c on a member's role changes, with the
	// event in its environment (DLEDGER_ROLE, DLEDGER_TERM, DLEDGER_LEADER, DLEDGER_GROUP, ...):
	// in order, one at a time per member, a newer event cancelling a run still going (see
	// hooks.go for the rules).
	OnRoleChange string
	// OnStop, if set, is a command run once per member at its Stop, after the hook for its final
	// event.
	OnStop string
	// HookTimeout bounds each hook run; a hook still running is killed. Zero: DefaultHookTimeout.
	HookTimeout time.Duration
	// TLS, if set, serves the admin API and the read-only listener over HTTPS with its
	// certificate (tlsfiles.Load reads the files; its Reload swaps them for new connections),
	// and verifies a client certificate presented against its CA, if it has one.
	TLS *tlsfiles.Store
	// ClientCertAuth makes the admin API's writing routes (every route whose method is not GET,
	// HEAD or OPTIONS: transfer, ledger, members, drain, and any added later) need a client
	// certificate signed by TLS's CA, on top of the AdminToken if one is set; reads stay open to
	// any TLS client. It needs TLS with a CA.
	ClientCertAuth bool
	// ClientCertAuthReads extends ClientCertAuth to every route of both listeners, the reads,
	// the health routes and /metrics included: every client (scraper, load balancer, tool) then
	// needs a certificate signed by TLS's CA. It needs TLS with a CA; it implies ClientCertAuth.
	ClientCertAuthReads bool
	// InsecureNetworkTrusted lets an admin or read-only listener that other hosts can reach serve
	// plain HTTP: the operator says the network between them and their clients is trusted (a
	// private segment, a host-local namespace). Without it such an address needs TLS.
	InsecureNetworkTrusted bool
	// WriteTimeout bounds writing an admin answer, so it must cover the slowest one: a transfer
	// waits up to its transfer bound, a member's removal up to its hand-over. Zero: 60 s.
	WriteTimeout time.Duration
}

// defaultWriteTimeout is Config.WriteTimeout's zero value.
const defaultWriteTimeout = 60 * time.Second

// minAdminTokenLen: a shorter token could be guessed.
const minAdminTokenLen = 16

// Validate checks c without touching the disk or the network.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve checks c and fills in the defaults.
func (c Config) resolve() (Config, error) {
	var err error
	if c.HookTimeout, err = resolveHookTimeout(c); err != nil {
		return c, err
	}
	if c.WriteTimeout < 0 {
		return c, fmt.Errorf("write timeout %v: want a positive duration", c.WriteTimeout)
	} else if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	for _, a := range []struct{ name, addr string }{{"http", c.HTTPAddr}, {"metrics", c.MetricsAddr}} {
		if a.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			return c, fmt.Errorf("%s address %q: %w", a.name, a.addr, err)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return c, fmt.Errorf("%s address %q: bad port %q", a.name, a.addr, port)
		}
	}
	if err := c.checkExposure(); err != nil {
		return c, err
	}
	if c.AdminToken != "" && len(c.AdminToken) < minAdminTokenLen {
		return c, fmt.Errorf("admin token is %d bytes: use at least %d (e.g. head -c 32 /dev/urandom | base64)",
			len(c.AdminToken), minAdminTokenLen)
	}
	return c, nil
}

// checkExposure refuses an admin address other hosts can reach without a token or client
// certificates, client certificates without TLS and a CA, and plain HTTP on an address other
// hosts can reach unless the network is said to be trusted: the bearer token, the status of
// every member and the watch streams would cross it in clear text.
func (c Config) checkExposure() error {
	if c.HTTPAddr != "" && c.AdminToken == "" && !c.ClientCertAuth && !c.ClientCertAuthReads && !isLoopback(c.HTTPAddr) {
		return fmt.Errorf("admin address %q can be reached from other hosts, and its PUT /v1/ledger and "+
			"POST /v1/transfer change the election: give it a token (--admin-token-file), require client certificates "+
			"(--client-cert-auth) or listen on loopback", c.HTTPAddr)
	}
	if (c.ClientCertAuth || c.ClientCertAuthReads) && (c.TLS == nil || !c.TLS.HasCA()) {
		return errors.New("client certificate authentication (--client-cert-auth) needs TLS (--cert-file, --cert-key-file) " +
			"and the CA that signs the clients' certificates (--trusted-ca-file)")
	}
	if c.TLS != nil || c.InsecureNetworkTrusted {
		return nil
	}
	for _, a := range []struct{ name, flag, addr string }{{"admin", "--http", c.HTTPAddr}, {"metrics", "--metrics", c.MetricsAddr}} {
		if a.addr != "" && !isLoopback(a.addr) {
			return fmt.Errorf("%s address %q (%s) can be reached from other hosts, and plain HTTP would carry its "+
				"token and every member's status in clear text: serve it over TLS (--cert-file and --cert-key-file), "+
				"listen on loopback, or say the network is trusted with --insecure-network-trusted", a.name, a.addr, a.flag)
		}
	}
	return nil
}
