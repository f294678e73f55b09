package server

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// DaemonConfig is what the `dledger server` process adds to a member: the HTTP admin API, the
// read-only metrics listener and the hook commands. A broker that embeds the member sets none
// of it: it serves AdminHandler and ReadOnlyHandler on its own HTTP server if it wants the
// routes, and subscribes to role events instead of running hooks. One DaemonConfig belongs to
// one process (docs/design.md, "Many groups in one process").
type DaemonConfig struct {
	// HTTPAddr is the admin API's listen address ("" disables it). An address other hosts can
	// reach needs an AdminToken.
	HTTPAddr string
	// AdminAdvertise, if set, is the admin address this member tells the other members (so
	// `dledger status` can find every member from one), when HTTPAddr binds an address others
	// cannot use as it is (0.0.0.0, a pod IP behind a Service). Empty: the bound admin address.
	AdminAdvertise string
	// AdminToken, if set, must be presented as "Authorization: Bearer <token>" by the admin
	// API's mutating requests (PUT /v1/ledger, POST /v1/transfer); reads stay open.
	AdminToken string
	// MetricsAddr is a read-only listener for /metrics, the health routes, /v1/status, /v1/watch
	// and /v1/members ("" disables it), so Prometheus, load balancers and watchers never need
	// the admin address.
	MetricsAddr string
	// OnRoleChange, if set, is a command run with /bin/sh -c on role changes, with the event in
	// its environment (DLEDGER_ROLE, DLEDGER_TERM, DLEDGER_LEADER, ...): in order, one at a
	// time, a newer event cancelling a run still going (see hooks.go for the rules).
	OnRoleChange string
	// OnStop, if set, is a command run once at Stop, after the hook for the final event.
	OnStop string
	// HookTimeout bounds each hook run; a hook still running is killed. Zero: DefaultHookTimeout.
	HookTimeout time.Duration
}

// WithDaemon runs the member with the daemon's settings d: New validates them with the Config.
func WithDaemon(d DaemonConfig) Option { return func(o *options) { o.daemon = d } }

// minAdminTokenLen: a shorter token could be guessed.
const minAdminTokenLen = 16

// Validate checks d without touching the disk or the network.
func (d DaemonConfig) Validate() error {
	_, err := d.resolve()
	return err
}

// resolve checks d and fills in the hook timeout's default.
func (d DaemonConfig) resolve() (DaemonConfig, error) {
	var err error
	if d.HookTimeout, err = resolveHookTimeout(d); err != nil {
		return d, err
	}
	for _, a := range []struct{ name, addr string }{{"http", d.HTTPAddr}, {"metrics", d.MetricsAddr}} {
		if a.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			return d, fmt.Errorf("%s address %q: %w", a.name, a.addr, err)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return d, fmt.Errorf("%s address %q: bad port %q", a.name, a.addr, port)
		}
	}
	if d.HTTPAddr != "" && d.AdminToken == "" && !isLoopback(d.HTTPAddr) {
		return d, fmt.Errorf("admin address %q can be reached from other hosts, and its PUT /v1/ledger and "+
			"POST /v1/transfer change the election: give it a token (--admin-token-file) or listen on loopback",
			d.HTTPAddr)
	}
	if d.AdminToken != "" && len(d.AdminToken) < minAdminTokenLen {
		return d, fmt.Errorf("admin token is %d bytes: use at least %d (e.g. head -c 32 /dev/urandom | base64)",
			len(d.AdminToken), minAdminTokenLen)
	}
	return d, nil
}

// resolve checks c and d together: what New runs the member with.
func resolve(c Config, d DaemonConfig) (resolved, error) { return resolveFor(c, d, false) }

// resolveFor is resolve for a member with a port of its own or (hosted) of a Host.
func resolveFor(c Config, d DaemonConfig, hosted bool) (resolved, error) {
	r, err := c.resolveFor(hosted)
	if err != nil {
		return resolved{}, err
	}
	if r.DaemonConfig, err = d.resolve(); err != nil {
		return resolved{}, err
	}
	return r, nil
}
