// Package daemon is the `dledger server` process's side of a member: the HTTP admin API, the
// watch stream and long poll, member discovery, the read-only metrics listener and the hook
// commands. One Daemon serves every group member of a process (a server.Host of one group or
// of many, or members made with server.New): each member gets it through server.WithAttacher
// (Attacher), which subscribes its watch hub and hooks to the member's role events when the
// member is built and runs the hooks for its final event when it stops; package server itself
// knows nothing of HTTP (docs/design.md, "The admin surface").
//
// Routes of the admin listener (the read-only listener serves the reading ones):
//
//	GET    /v1/groups                        the host's members, paged and filtered (groups.go)
//	GET    /v1/groups/{group}/{id}/status    one member's status; likewise .../watch, .../leader,
//	                                         .../follower, .../members, .../readyz
//	POST   /v1/groups/{group}/{id}/transfer  hand that group's leadership over; PUT .../ledger
//	PUT    /v1/groups/{group}/{id}           add a member to the host (a configs: entry as JSON)
//	DELETE /v1/groups/{group}/{id}           remove one (a leader hands over first)
//	POST   /v1/drain                         hand over every group this host leads (/v1/undrain:
//	                                         lead again)
//	GET    /v1/membership                    a member's group configuration (membership.go; and
//	POST   /v1/membership/{op}               add, promote, remove, force-recover; under
//	                                         /v1/groups/{group}/{id}/ too)
//	GET    /metrics, /healthz                the process; /readyz: every member knows a leader
//
// and, while the process serves exactly one member, that member's routes at their
// single-member paths (/v1/status, /v1/transfer, /v1/watch, /v1/leader, ...), as before hosts.
//
// A route writes when its method is not GET, HEAD or OPTIONS (tls.go): only the admin listener
// serves those, each needs the AdminToken if one is set and, with Config.ClientCertAuth, a
// client certificate. Config.TLS serves both listeners over HTTPS.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/logctx"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
)

// Option customises a Daemon.
type Option func(*Daemon)

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(d *Daemon) { d.log = l } }

// WithRegisterer puts the hooks' metrics on r and, if r is also a prometheus.Gatherer, serves
// it on /metrics. Give the members the same registry (server.WithRegisterer), so /metrics
// serves theirs too. Default: no /metrics route, hook metrics on a registry of the daemon's own.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(d *Daemon) {
		d.reg = r
		d.gatherer, _ = r.(prometheus.Gatherer)
	}
}

// WithGatherer serves g on /metrics, whatever WithRegisterer was given (a process that leaves
// its members' series, hook metrics included, on a registry it does not serve).
func WithGatherer(g prometheus.Gatherer) Option { return func(d *Daemon) { d.gatherer = g } }

// Host is what the daemon adds and removes members with (PUT and DELETE of
// /v1/groups/{group}/{id}): *server.Host.
type Host interface {
	AddGroup(server.Config, ...server.Option) (*server.Server, error)
	RemoveGroup(ctx context.Context, group, self string) error
	Member(group, self string) *server.Server
	// Drain hands over every group the host leads and keeps it from leading (POST /v1/drain);
	// Undrain ends that (POST /v1/undrain).
	Drain(ctx context.Context) error
	Undrain()
}

// Daemon is one process's admin API, read-only listener and hooks, for every member attached
// to it.
type Daemon struct {
	cfg      Config
	log      *zap.Logger
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
	admin    *httpEndpoint // nil: no admin API
	readOnly *httpEndpoint // nil: no read-only listener

	mu      sync.Mutex
	members map[memberKey]*member
	// order is members ordered by group then id (sorted), nil when a member came or went
	// since it was made. Never changed in place: a reader keeps the slice it was given.
	order []*member
	host  Host
	// entryConfig turns a PUT's configs: entry into the member's Config (SetHost).
	entryConfig EntryConfig
}

type memberKey struct{ group, self string }

// finalEventWait bounds how long a member's Stop waits for its watch hub to receive the final
// event through the subscription (it takes microseconds unless the machine is stalled).
const finalEventWait = time.Second

// New checks cfg and builds the daemon without opening any socket.
func New(cfg Config, opts ...Option) (*Daemon, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: zap.NewNop(), members: map[memberKey]*member{}}
	for _, o := range opts {
		o(d)
	}
	if d.reg == nil {
		d.reg = prometheus.NewRegistry()
	}
	if cfg.HTTPAddr != "" {
		d.admin = newHTTPEndpoint("admin", cfg.HTTPAddr, d.Handler(), cfg.WriteTimeout, d.log)
	}
	if cfg.MetricsAddr != "" {
		d.readOnly = newHTTPEndpoint("metrics", cfg.MetricsAddr, d.ReadOnlyHandler(), httpReadTimeout, d.log)
	}
	if cfg.TLS != nil {
		for _, ep := range d.endpoints() {
			ep.tls = cfg.TLS.ServerConfig()
		}
	}
	return d, nil
}

// Listen opens the listeners, so a port in use is reported before any member starts.
func (d *Daemon) Listen() error {
	for _, ep := range d.endpoints() {
		if err := ep.listen(); err != nil {
			for _, e := range d.endpoints() {
				e.close()
			}
			return err
		}
	}
	return nil
}

// Serve starts serving on the listeners Listen opened.
func (d *Daemon) Serve() {
	for _, ep := range d.endpoints() {
		ep.serve()
	}
}

// Stop closes the listeners, waiting for requests in flight until ctx ends. Stop the members
// first: their watch streams end with their final events.
func (d *Daemon) Stop(ctx context.Context) error {
	var errs []error
	for _, ep := range d.endpoints() {
		if err := ep.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d *Daemon) endpoints() []*httpEndpoint {
	var eps []*httpEndpoint
	for _, ep := range []*httpEndpoint{d.admin, d.readOnly} {
		if ep != nil {
			eps = append(eps, ep)
		}
	}
	return eps
}

// HTTPAddr is the admin API's bound address (after Listen), or "".
func (d *Daemon) HTTPAddr() string { return d.admin.boundAddr() }

// MetricsAddr is the read-only listener's bound address (after Listen), or "".
func (d *Daemon) MetricsAddr() string { return d.readOnly.boundAddr() }

// Attacher is what each member gets the daemon through: server.WithAttacher(d.Attacher()),
// given to server.New or server.NewHost.
func (d *Daemon) Attacher() server.Attacher { return attacher{d} }

type attacher struct{ d *Daemon }

// Attach builds the member's watch hub and hook runner, subscribed to its role events, and
// serves its routes until it stops.
func (a attacher) Attach(s *server.Server) (server.Attachment, error) {
	return a.d.attach(s)
}

// DetachTimeout is what the hooks for a member's final event and its stop may take.
func (a attacher) DetachTimeout() time.Duration { return hookStopTimeout(a.d.cfg) }

// attach is Attacher.Attach.
func (d *Daemon) attach(s *server.Server) (server.Attachment, error) {
	cfg := s.Config()
	k := memberKey{cfg.Group, cfg.SelfID}
	m := &member{d: d, s: s, cfg: memberConfig{Group: cfg.Group, SelfID: cfg.SelfID, Ledger: cfg.Ledger, LeaderReadyGate: cfg.LeaderReadyGate}}
	m.watch = newWatchHub(&m.cfg)
	if err := m.startHooks(d.reg); err != nil {
		return server.Attachment{}, err
	}
	// One subscription for both, inline: neither blocks, and a host has thousands of members,
	// whose events a crash publishes by the thousand (a goroutine per member per burst before).
	unsub := s.SubscribeInline(func(ev dledger.RoleEvent) {
		m.watch.publish(ev)
		if m.hooks != nil {
			m.hooks.onEvent(ev)
		}
	})
	d.mu.Lock()
	if d.members[k] != nil { // two members with one identity: a host refuses it before New
		d.mu.Unlock()
		unsub()
		m.closeHooks(context.Background(), nil)
		return server.Attachment{}, fmt.Errorf("daemon: member %s of group %s is already served", cfg.SelfID, cfg.Group)
	}
	d.members[k] = m
	d.order = nil
	d.mu.Unlock()
	m.unsub = unsub
	// Method values, not closures over m, k and d: 48 bytes less of each of a host's members.
	return server.Attachment{Advertise: m.advertised, Detach: m.detach}, nil
}

// detach is the member's Attachment.Detach.
func (m *member) detach(ctx context.Context, final *dledger.RoleEvent) {
	// The final event may not have reached the hub yet (it is published on a Maintainer
	// worker, inline, and Stop may return first): wait a moment for the hub to have it in
	// order, else hand it over here (streams then
	// skip what was queued before it), so every stream ends with it and the listeners'
	// Shutdown is not held up by them.
	if final != nil {
		wait, cancel := context.WithTimeout(ctx, finalEventWait)
		if !m.watch.awaitEnd(wait) {
			m.watch.publish(*final)
		}
		cancel()
	} else {
		m.watch.end()
	}
	m.unsub()
	m.closeHooks(ctx, final)
	d, k := m.d, memberKey{m.cfg.Group, m.cfg.SelfID}
	d.mu.Lock()
	if d.members[k] == m {
		delete(d.members, k)
		d.order = nil
	}
	d.mu.Unlock()
}

// member returns the attached member self of group, or nil.
func (d *Daemon) member(group, self string) *member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members[memberKey{group, self}]
}

// only returns the one attached member, or nil and how many there are.
func (d *Daemon) only() (*member, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.members) != 1 {
		return nil, len(d.members)
	}
	for _, m := range d.members {
		return m, 1
	}
	return nil, 0
}

// sorted returns the attached members, ordered by group then id: read-only, shared by every
// caller until a member comes or goes. A tool that pages through 10,000 members' GET
// /v1/groups every few hundred milliseconds sorted them all for each page (issue 29).
func (d *Daemon) sorted() []*member {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.order == nil {
		out := make([]*member, 0, len(d.members))
		for _, m := range d.members {
			out = append(out, m)
		}
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i].cfg, out[j].cfg
			return a.Group < b.Group || a.Group == b.Group && a.SelfID < b.SelfID
		})
		d.order = out
	}
	return d.order
}

// Handler is the admin API (also usable on a broker's own HTTP server): every route of the
// package comment. With Config.AdminToken set, the mutating ones need it as a bearer token.
func (d *Daemon) Handler() http.Handler { return d.writesNeedClientCert(d.handler(true)) }

// ReadOnlyHandler serves only what reads: /v1/groups, every member's status, health checks,
// watch stream, long poll and /v1/members, and /metrics. It is what Config.MetricsAddr
// listens with.
func (d *Daemon) ReadOnlyHandler() http.Handler { return d.writesNeedClientCert(d.handler(false)) }

func (d *Daemon) handler(admin bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/groups", d.groupsHandler())
	mux.HandleFunc("/v1/groups/{group}/{id}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		m := d.member(r.PathValue("group"), r.PathValue("id"))
		if m == nil {
			writeJSON(w, http.StatusNotFound, errorJSON{Error: fmt.Sprintf("no member %s of group %s on this host",
				r.PathValue("id"), r.PathValue("group"))})
			return
		}
		rest := r.PathValue("rest")
		r2 := r.Clone(r.Context())
		if rest == "readyz" || rest == "healthz" {
			r2.URL.Path = "/" + rest
		} else {
			r2.URL.Path = "/v1/" + rest
		}
		r2.URL.RawPath = ""
		m.handler(admin).ServeHTTP(w, r2)
	})
	if admin {
		mux.HandleFunc("PUT /v1/groups/{group}/{id}", d.addMember)
		mux.HandleFunc("DELETE /v1/groups/{group}/{id}", d.removeMember)
		mux.HandleFunc("POST /v1/drain", d.drain)
		mux.HandleFunc("POST /v1/undrain", d.undrain)
	}
	// Live: the process serves HTTP (whatever its members' roles). GET answers "ok".
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("OPTIONS /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
	})
	if d.gatherer != nil {
		mux.Handle("GET /metrics", metricsHandler(d.gatherer))
	}
	// Ready: the one member's check while there is one; on a host of several, every member
	// knows a leader (leads or follows one), so each of its groups serves.
	for _, method := range []string{"GET", "OPTIONS"} {
		mux.HandleFunc(method+" /readyz", func(w http.ResponseWriter, r *http.Request) {
			if m, n := d.only(); m != nil || n == 0 {
				d.single(admin, w, r, m, n)
				return
			}
			code, waiting := d.hostReady()
			if r.Method == http.MethodOptions {
				w.Header().Set("Allow", "GET, HEAD, OPTIONS")
				w.WriteHeader(code)
				return
			}
			writeJSON(w, code, map[string]int{"members": len(d.sorted()), "withoutLeader": waiting})
		})
	}
	// Everything else is the single-member API: the one member's routes while there is one.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m, n := d.only()
		d.single(admin, w, r, m, n)
	})
	return mux
}

// single serves r with the process's one member m, or says there are n of them.
func (d *Daemon) single(admin bool, w http.ResponseWriter, r *http.Request, m *member, n int) {
	if m == nil {
		writeJSON(w, http.StatusNotFound, errorJSON{Error: fmt.Sprintf(
			"this process serves %d group members: ask one at /v1/groups/{group}/{id}/... (GET /v1/groups lists them; "+
				"dledger status, watch and transfer take --group)", n)})
		return
	}
	m.handler(admin).ServeHTTP(w, r)
}

// hostReady is /readyz of a host of several members: 200 when every member knows a leader,
// else 503 with how many do not.
func (d *Daemon) hostReady() (code, withoutLeader int) {
	for _, m := range d.sorted() {
		st := m.s.Summary()
		if st.LeaderID == "" || (st.Role != protocol.LEADER && st.Role != protocol.FOLLOWER) {
			withoutLeader++
		}
	}
	if withoutLeader > 0 {
		return http.StatusServiceUnavailable, withoutLeader
	}
	return http.StatusOK, 0
}

// logger is the member's logger: the daemon's, with the member's group and id. Built when
// something is logged (rarely: hooks, membership changes), not kept per member.
func (m *member) logger() *zap.Logger {
	return logctx.With(m.d.log, zapGroup(m.cfg.Group, m.cfg.SelfID)...)
}

// zapGroup names a member in a log line.
func zapGroup(group, self string) []zap.Field {
	return []zap.Field{zap.String("group", group), zap.String("self", self)}
}
