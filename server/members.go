package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"

	"github.com/dledger-go/dledger/server/adminclient"
)

// Status from one address: members tell each other their admin address in their METADATA
// answers (MetadataResponse.AdminAddr), and GET /v1/members asks every peer for it over the
// member's own authenticated rpc connections, so a tool that reaches one member finds the
// others (`dledger status --http ONE`).

// membersTimeout bounds how long GET /v1/members waits for the peers' answers.
const membersTimeout = time.Second

// maxAdminAddrLen bounds an advertised admin address: a DNS name (255) and a port.
const maxAdminAddrLen = 255 + len(":65535")

// metadataHandler is the rpc handler: the elector, with this member's admin address added to
// its METADATA answers (the elector knows nothing of HTTP).
type metadataHandler struct {
	rpc.Handler
	s *Server
}

func (h metadataHandler) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	resp := h.Handler.HandleMetadata(req)
	if resp.Code == protocol.CodeSuccess { // another group learns nothing (the elector's rule)
		resp.AdminAddr, resp.ReadAddr = h.s.advertisedAdminAddr(), h.s.advertisedReadAddr()
	}
	return resp
}

// advertisedAdminAddr is the admin address this member tells others: DaemonConfig.AdminAdvertise,
// else the bound admin address, with an unspecified host (0.0.0.0, ::) replaced by the host of
// this member's rpc address in the peers string, which the others already dial. "" with no
// admin API.
func (s *Server) advertisedAdminAddr() string {
	if s.cfg.AdminAdvertise != "" {
		return s.cfg.AdminAdvertise
	}
	return s.reachableAs(s.HTTPAddr())
}

// advertisedReadAddr is the read-only listener's address as others should dial it (the bound
// address, its unspecified host replaced as for the admin address), or "" with none.
func (s *Server) advertisedReadAddr() string { return s.reachableAs(s.MetricsAddr()) }

// reachableAs is a bound address as the other members can dial it: an unspecified host
// (0.0.0.0, ::) is replaced by the host of this member's rpc address in the peers string.
func (s *Server) reachableAs(bound string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound // "" (no such listener)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		for _, p := range s.peers {
			if p.ID == s.cfg.SelfID {
				if h, _, err := net.SplitHostPort(p.Addr); err == nil {
					return net.JoinHostPort(h, port)
				}
			}
		}
	}
	return bound
}

// checkAdminAddr refuses an advertised admin address that is not a plain host:port: it came
// from the network, and a tool puts it into a URL.
func checkAdminAddr(a string) error {
	if len(a) > maxAdminAddrLen {
		return fmt.Errorf("advertised admin address is %d bytes (at most %d)", len(a), maxAdminAddrLen)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("advertised admin address %q: %v", a, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("advertised admin address %q: bad port", a)
	}
	if host == "" {
		return fmt.Errorf("advertised admin address %q: no host", a)
	}
	for _, c := range []byte(host) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '-' || c == '_' || c == ':' || c == '%'
		if !ok {
			return fmt.Errorf("advertised admin address %q: bad character in host", a)
		}
	}
	return nil
}

// probeGate lets one discovery at a time ask the peers: each asks every peer once over the
// connections the election uses, and a flood of GET /v1/members must not fill them.
type probeGate struct {
	once sync.Once
	ch   chan struct{}
}

func (g *probeGate) acquire(ctx context.Context) bool {
	g.once.Do(func() { g.ch = make(chan struct{}, 1) })
	select {
	case g.ch <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *probeGate) release() { <-g.ch }

// members asks every other member for its METADATA (in parallel, over this member's
// authenticated rpc client, until ctx ends) and returns every member in the peers string's
// order, this member included.
func (s *Server) members(ctx context.Context) []adminclient.MemberJSON {
	type answer struct {
		i    int
		resp *protocol.MetadataResponse
		err  error
	}
	out := make([]adminclient.MemberJSON, len(s.peers))
	answers := make(chan answer, len(s.peers)) // a late callback never blocks
	answered := make([]bool, len(s.peers))
	asked := 0
	for i, p := range s.peers {
		out[i] = adminclient.MemberJSON{ID: p.ID, RPCAddr: p.Addr}
		if p.ID == s.cfg.SelfID {
			out[i].Self, out[i].Reachable = true, true
			out[i].AdminAddr, out[i].ReadAddr = s.advertisedAdminAddr(), s.advertisedReadAddr()
			answered[i] = true
			continue
		}
		req := &protocol.MetadataRequest{Header: protocol.Header{Group: s.cfg.Group, RemoteID: p.ID, LocalID: s.cfg.SelfID}}
		s.client.SendMetadata(p.ID, req, func(r *protocol.MetadataResponse, err error) { answers <- answer{i, r, err} })
		asked++
	}
	for ; asked > 0; asked-- {
		var a answer
		select {
		case a = <-answers:
		case <-ctx.Done():
			for i := range out {
				if !answered[i] {
					out[i].Error = "no answer in time"
				}
			}
			return out
		}
		answered[a.i] = true
		m := &out[a.i]
		switch {
		case a.err != nil:
			m.Error = a.err.Error()
		case a.resp.Code != protocol.CodeSuccess:
			m.Error = "answered " + a.resp.Code.String()
		case a.resp.LocalID != m.ID:
			m.Error = fmt.Sprintf("answered as %q", a.resp.LocalID)
		default:
			m.Reachable = true
			var errs []string
			if a.resp.AdminAddr != "" {
				if err := checkAdminAddr(a.resp.AdminAddr); err != nil {
					errs = append(errs, err.Error())
				} else {
					m.AdminAddr = a.resp.AdminAddr
				}
			}
			if a.resp.ReadAddr != "" {
				if err := checkAdminAddr(a.resp.ReadAddr); err != nil {
					errs = append(errs, "read-only listener: "+err.Error())
				} else {
					m.ReadAddr = a.resp.ReadAddr
				}
			}
			if m.AdminAddr == "" && m.ReadAddr == "" && len(errs) == 0 {
				errs = append(errs, "no admin address (no admin API and no read-only listener, or a member too old to tell)")
			}
			m.Error = strings.Join(errs, "; ")
		}
	}
	return out
}

// membersRoute serves GET /v1/members: every member with its admin address, as the peers
// answer this member's METADATA requests within membersTimeout.
func (s *Server) membersRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/members", func(w http.ResponseWriter, r *http.Request) {
		wait, cancel := context.WithTimeout(r.Context(), 5*membersTimeout)
		defer cancel()
		if !s.probes.acquire(wait) {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "busy: other member discoveries are running"})
			return
		}
		defer s.probes.release()
		ctx, cancel2 := context.WithTimeout(r.Context(), membersTimeout)
		defer cancel2()
		writeJSON(w, http.StatusOK, s.members(ctx))
	})
}
