package daemon

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

func msAgo(t time.Time, now time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return now.Sub(t).Milliseconds()
}

// toJSON converts a status snapshot to the API's JSON shape.
func toJSON(st dledger.Status, now time.Time) adminclient.StatusJSON {
	out := adminclient.StatusJSON{Group: st.Group, SelfID: st.SelfID, Role: st.Role.String(), Term: st.Term,
		LeaderID: st.LeaderID, VoteFor: st.VoteFor, LedgerEndTerm: st.Ledger.Term, LedgerEndIndex: st.Ledger.Index,
		KnownMaxTermInGroup: st.KnownMaxTermInGroup, LastParseResult: st.LastParseResult.String(),
		LastHeartBeatMsAgo: msAgo(st.LastHeartBeat, now), TakingLeadership: st.TakingLeadership,
		TransferringTo: st.TransferringTo, PeersString: st.Peerstring, Peers: []adminclient.PeerJSON{}, Abstaining: !st.LedgerKnown,
		FollowerTimeoutMs: st.Windows.Follower.Milliseconds(), CheckQuorumMs: st.Windows.Quorum.Milliseconds()}
	out.ConfigEpoch = int64(st.Membership.Epoch)
	for _, p := range st.Peers {
		pj := adminclient.PeerJSON{ID: p.ID, Addr: p.Addr, Self: p.Self, Kind: peerKind(st.Membership, p)}
		if st.Role == protocol.LEADER {
			alive, known := p.Alive, p.LedgerSet
			term, index, ack := p.Ledger.Term, p.Ledger.Index, msAgo(p.LastAck, now)
			pj.Alive, pj.LedgerKnown, pj.LedgerEndTerm, pj.LedgerEndIndex, pj.LastAckMsAgo = &alive, &known, &term, &index, &ack
		}
		out.Peers = append(out.Peers, pj)
	}
	return out
}

// transferReasons names each TransferLeadership reason in adminclient.TransferJSON.Reason.
var transferReasons = []struct {
	err  error
	name string
}{
	{server.ErrNotLeader, adminclient.ReasonNotLeader}, {server.ErrUnknownMember, adminclient.ReasonUnknownMember},
	{server.ErrTransferInProgress, adminclient.ReasonTransferInProgress},
	{server.ErrTransfereeUnreachable, adminclient.ReasonTransfereeUnreachable},
	{server.ErrTransfereeAbstaining, adminclient.ReasonTransfereeAbstaining},
	{server.ErrTransfereeBehind, adminclient.ReasonTransfereeBehind}, {server.ErrTermChanged, adminclient.ReasonTermChanged},
	{server.ErrTransfereeFailed, adminclient.ReasonTransfereeFailed}, {server.ErrOutcomeUnknown, adminclient.ReasonOutcomeUnknown},
	{server.ErrStopped, adminclient.ReasonStopped},
	{server.ErrTransferRefused, adminclient.ReasonRefused}, // a forwarded refusal whose reason only the leader knows
}

// transferJSON is TransferLeadership's answer as POST /v1/transfer's body, with the wire code.
func transferJSON(res server.TransferResult, err error) (adminclient.TransferJSON, protocol.ResponseCode) {
	var te *server.TransferError
	if !errors.As(err, &te) {
		return adminclient.TransferJSON{Code: protocol.CodeSuccess.String(), Term: res.Term, LeaderID: res.LeaderID}, protocol.CodeSuccess
	}
	out := adminclient.TransferJSON{Code: te.Code.String(), Term: te.Term, LeaderID: te.LeaderID, Error: te.Error(), Behind: te.Behind}
	for _, r := range transferReasons {
		if te.Reason == r.err {
			out.Reason = r.name
		}
	}
	return out, te.Code
}

type errorJSON struct {
	Error string `json:"error"`
}

const maxBody = 4 << 10

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// These bodies are read by people and tools, never embedded in HTML: "<admin token>" must
	// read as written, not as "\u003cadmin token\u003e".
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, errorJSON{Error: fmt.Sprintf(format, args...)})
}

// badBody answers a body decodeBody refused: 413 when it was larger than maxBody (the client
// must send less, not fix its syntax), else 400 with the decoder's reason and the expected shape.
func badBody(w http.ResponseWriter, err error, want string) {
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorJSON{Error: fmt.Sprintf(
			"request body larger than %d bytes (want %s)", maxBody, want)})
		return
	}
	badRequest(w, "bad JSON: %v (want %s)", err, want)
}

// decodeBody reads one JSON object into fields (exact key -> pointer to its value), refusing
// any other key, trailing data and large bodies. encoding/json matches struct fields to keys
// case-insensitively even with DisallowUnknownFields, so {"endterm":1} would be taken for
// endTerm; a client with a misspelt key must hear about it, hence the exact-key map.
func decodeBody(r *http.Request, fields map[string]any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if raw == nil {
		return errors.New("want a JSON object")
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON object")
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same body
	for _, k := range keys {
		target, ok := fields[k]
		if !ok {
			return fmt.Errorf("unknown field %q", k)
		}
		if err := json.Unmarshal(raw[k], target); err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
	}
	return nil
}

// readOnlyRoutes are the routes both listeners serve: status, health and metrics.
func (m *member) readOnlyRoutes(mux *http.ServeMux) {
	m.watchRoutes(mux) // GET /v1/watch (watch.go)
	// GET /v1/members (members.go)
	m.membersRoute(mux)
	m.membershipReadRoute(mux) // GET /v1/membership (membership.go)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st := m.s.FullStatus()
		j := toJSON(st, time.Now())
		j.LedgerMode = m.cfg.Ledger.String()
		j.ConfigSource, j.ConfigWarning = m.s.ConfigurationSource()
		j.Ready = m.readyJSON(st)
		writeJSON(w, http.StatusOK, j)
	})
	// Health checks for load balancers: 200 when the member is what the route asks, else 503.
	m.healthRoute(mux, "/v1/leader", m.s.ServesAsLeader) // the leader, once ready (server.Config.LeaderReadyGate)
	m.healthRoute(mux, "/v1/follower", func(st dledger.Status) bool {
		return st.Role == protocol.FOLLOWER && st.LeaderID != ""
	})
	// Ready: the member knows a leader (it leads or follows one), so the group serves.
	m.healthRoute(mux, "/readyz", func(st dledger.Status) bool {
		return st.LeaderID != "" && (st.Role == protocol.LEADER || st.Role == protocol.FOLLOWER)
	})
	// Live: the process serves HTTP (whatever its role). GET answers "ok".
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("OPTIONS /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
	})
}

// metricsHandler serves g on /metrics.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// healthRoute serves a health check at path for GET, HEAD (net/http's mux answers HEAD for a
// GET route) and OPTIONS: HAProxy's "option httpchk" sends OPTIONS by default, and a 405 would
// mark every member down. The status says it all (200 when ok holds, else 503); GET adds a
// small JSON body with role, leader and term.
func (m *member) healthRoute(mux *http.ServeMux, path string, ok func(dledger.Status) bool) {
	status := func() (int, dledger.Status) {
		st := m.s.FullStatus()
		if ok(st) {
			return http.StatusOK, st
		}
		return http.StatusServiceUnavailable, st
	}
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		if path == "/v1/leader" && m.serveLeaderWait(w, r) { // ?wait=: the long poll (watch.go)
			return
		}
		code, st := status()
		writeJSON(w, code, map[string]any{"leaderId": st.LeaderID, "term": st.Term, "role": st.Role.String()})
	})
	mux.HandleFunc("OPTIONS "+path, func(w http.ResponseWriter, r *http.Request) {
		code, _ := status()
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(code)
	})
}

// member is one member the daemon serves: its routes, watch hub and hooks.
type member struct {
	d     *Daemon
	s     *server.Server
	cfg   memberConfig // what the daemon reads of s.Config()
	watch *watchHub    // GET /v1/watch and the long poll (watch.go)
	hooks *hookRunner  // runs Config.OnRoleChange and OnStop (hooks.go); nil: neither set
	unsub func()       // its role-event subscription's cancel (detach)
	// web is made by the first request for the member (webState): most of a host's thousands
	// of members are never asked for by path, and its gate and routes were 56 bytes of each.
	web atomic.Pointer[memberWeb]
}

// memberWeb is what a member's own routes keep: the discoveries' gate and the routes at
// their single-member paths, every one (admin) or only those that read.
type memberWeb struct {
	probes            probeGate // GET /v1/members (members.go)
	adminMux, readMux *http.ServeMux
}

// webState is m.web, made if it was not (by one of the requests racing to make it).
func (m *member) webState() *memberWeb {
	if w := m.web.Load(); w != nil {
		return w
	}
	w := &memberWeb{readMux: http.NewServeMux(), adminMux: http.NewServeMux()}
	m.readOnlyRoutes(w.readMux)
	m.readOnlyRoutes(w.adminMux)
	m.adminRoutes(w.adminMux)
	if m.web.CompareAndSwap(nil, w) {
		return w
	}
	return m.web.Load()
}

// memberConfig is what the daemon reads of a member's server.Config, kept instead of the whole
// Config (some 300 bytes, one per member of a host of thousands).
type memberConfig struct {
	Group, SelfID   string
	Ledger          server.LedgerMode
	LeaderReadyGate bool
}

// handler is the member's routes at their single-member paths: every one (admin) or only
// those that read.
func (m *member) handler(admin bool) http.Handler {
	w := m.webState()
	if admin {
		return w.adminMux
	}
	return w.readMux
}

// readyJSON is /v1/status's "ready": with Config.LeaderReadyGate, on a leader, whether it may
// serve (ServesAsLeader); left out on any other role and on a member without the gate, which
// has no readiness to report (a "ready": true there would suggest a gate that is not there).
func (m *member) readyJSON(st dledger.Status) *bool {
	if st.Role != protocol.LEADER || !m.cfg.LeaderReadyGate {
		return nil
	}
	r := m.s.ServesAsLeader(st)
	return &r
}

// authorized lets a mutating request through when no token is configured (a loopback admin
// address) or when it carries "Authorization: Bearer <token>"; otherwise it answers 401.
func (m *member) authorized(w http.ResponseWriter, r *http.Request) bool {
	return m.d.authorized(w, r)
}

// authorized is member.authorized for the daemon's own routes.
func (d *Daemon) authorized(w http.ResponseWriter, r *http.Request) bool {
	if d.cfg.AdminToken == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(got), []byte(d.cfg.AdminToken)) == 1 {
		return true
	}
	d.adminRefused(r)
	w.Header().Set("WWW-Authenticate", `Bearer realm="dledger admin"`)
	// Name the way that works for this route: dledger transfer takes a token file; a ledger
	// report comes from the application beside the member, which sends the header itself.
	how := "the member's --admin-token-file holds the token"
	if strings.HasSuffix(r.URL.Path, "/transfer") {
		how = "dledger transfer --token-file FILE sends it; FILE is a copy of the member's --admin-token-file"
	}
	writeJSON(w, http.StatusUnauthorized, errorJSON{Error: "this request changes the election: it needs " +
		"\"Authorization: Bearer <admin token>\" (" + how + ")"})
	return false
}

// adminRoutes adds the mutating routes to mux:
//
//	PUT  /v1/ledger   {"endTerm":T,"endIndex":I}: the co-located application's ledger end
//	POST /v1/transfer {"to":"n2"}: hand leadership to n2 (forwarded to the leader)
//
// With Config.AdminToken set, they need it as a bearer token.
func (m *member) adminRoutes(mux *http.ServeMux) {
	m.membershipWriteRoutes(mux) // POST /v1/membership/{op} (membership.go)
	mux.HandleFunc("PUT /v1/ledger", func(w http.ResponseWriter, r *http.Request) {
		if !m.authorized(w, r) {
			return
		}
		var body adminclient.LedgerJSON
		if err := decodeBody(r, map[string]any{"endTerm": &body.EndTerm, "endIndex": &body.EndIndex}); err != nil {
			badBody(w, err, `{"endTerm":T,"endIndex":I}`)
			return
		}
		if body.EndTerm == nil || body.EndIndex == nil {
			badRequest(w, "endTerm and endIndex are both required")
			return
		}
		if err := m.s.UpdateLedger(*body.EndTerm, *body.EndIndex); errors.Is(err, server.ErrNoStorage) {
			writeJSON(w, http.StatusConflict, errorJSON{Error: err.Error() + " (start it with --ledger sidecar)"})
			return
		} else if err != nil {
			badRequest(w, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int64{"endTerm": *body.EndTerm, "endIndex": *body.EndIndex})
	})
	mux.HandleFunc("POST /v1/transfer", func(w http.ResponseWriter, r *http.Request) {
		if !m.authorized(w, r) {
			return
		}
		var body adminclient.TransferRequestJSON
		if err := decodeBody(r, map[string]any{"to": &body.To}); err != nil || body.To == "" {
			if err == nil {
				err = errors.New("\"to\" is required")
			}
			badBody(w, err, `{"to":"n2"}`)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), m.s.TransferTimeout()+time.Second)
		defer cancel()
		res, err := m.s.TransferLeadership(ctx, body.To)
		out, code := transferJSON(res, err)
		writeJSON(w, transferHTTPStatus(code), out)
	})
}

// transferHTTPStatus maps a transfer's answer to an HTTP status: 200 done, 400 bad target,
// 409 refused in this state (not leader, lagging, another transfer), 502 tried and failed,
// 504 no answer in time.
func transferHTTPStatus(c protocol.ResponseCode) int {
	switch c {
	case protocol.CodeSuccess:
		return http.StatusOK
	case protocol.CodeUnknownMember, protocol.CodeUnknownGroup:
		return http.StatusBadRequest
	case protocol.CodeNotLeader, protocol.CodeInconsistentTerm, protocol.CodeFallBehindTooMuch,
		protocol.CodeLeaderTransferring, protocol.CodeInconsistentLeader:
		return http.StatusConflict
	case protocol.CodeTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// adminRefused records a mutating admin request refused for its token.
func (d *Daemon) adminRefused(r *http.Request) {
	d.log.Warn("admin request refused: missing or wrong bearer token",
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
}
