package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

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

// advertised is what the member tells its peers in its METADATA answers (the daemon's
// server.Attachment.Advertise): the admin address and the read-only listener's.
func (m *member) advertised() (admin, read string) {
	admin = m.d.cfg.AdminAdvertise
	if admin == "" {
		admin = m.reachableAs(m.d.HTTPAddr())
	}
	return admin, m.reachableAs(m.d.MetricsAddr())
}

// reachableAs is a bound address as the other members can dial it: an unspecified host
// (0.0.0.0, ::) is replaced by the host of this member's rpc address in the peers string
// (read when needed, not kept: 16 bytes of each of a host's members, issue 29; a member's
// own address never changes while it runs).
func (m *member) reachableAs(bound string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound // "" (no such listener)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, _, err := net.SplitHostPort(m.s.SelfAddr()); err == nil {
			return net.JoinHostPort(h, port)
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
	if !plainPort(port) {
		return fmt.Errorf("advertised admin address %q: bad port", a)
	}
	if host == "" {
		return fmt.Errorf("advertised admin address %q: no host", a)
	}
	if strings.IndexFunc(host, func(c rune) bool { return !adminHostChar(c) }) >= 0 {
		return fmt.Errorf("advertised admin address %q: bad character in host", a)
	}
	return nil
}

// plainPort says whether port is a port number 1..65535 written as plain decimal (no sign, no
// leading zero).
func plainPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == port
}

// adminHostChar says whether c may stand in an advertised host: ASCII letters and digits and
// what host names and IP addresses (with an IPv6 zone) use.
func adminHostChar(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.ContainsRune(".-_:%", c)
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

// members asks every other member for its METADATA (server.Server.PeerMetadata, until ctx
// ends) and returns every member in the peers string's order, this member included, with the
// admin addresses they advertised, checked.
func (m *member) members(ctx context.Context) []adminclient.MemberJSON {
	answers := m.s.PeerMetadata(ctx)
	out := make([]adminclient.MemberJSON, len(answers))
	for i, a := range answers {
		j := &out[i]
		*j = adminclient.MemberJSON{ID: a.ID, RPCAddr: a.Addr, Self: a.Self}
		switch {
		case a.Self:
			j.Reachable, j.AdminAddr, j.ReadAddr = true, a.AdminAddr, a.ReadAddr
		case !a.Answered:
			j.Error = "no answer in time"
		case a.Err != nil:
			j.Error = a.Err.Error()
		default:
			j.Reachable = true
			var errs []string
			if a.AdminAddr != "" {
				if err := checkAdminAddr(a.AdminAddr); err != nil {
					errs = append(errs, err.Error())
				} else {
					j.AdminAddr = a.AdminAddr
				}
			}
			if a.ReadAddr != "" {
				if err := checkAdminAddr(a.ReadAddr); err != nil {
					errs = append(errs, "read-only listener: "+err.Error())
				} else {
					j.ReadAddr = a.ReadAddr
				}
			}
			if j.AdminAddr == "" && j.ReadAddr == "" && len(errs) == 0 {
				errs = append(errs, "no admin address (no admin API and no read-only listener, or a member too old to tell)")
			}
			j.Error = strings.Join(errs, "; ")
		}
	}
	return out
}

// membersRoute serves GET /v1/members: every member with its admin address, as the peers
// answer this member's METADATA requests within membersTimeout.
func (m *member) membersRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/members", func(w http.ResponseWriter, r *http.Request) {
		wait, cancel := context.WithTimeout(r.Context(), 5*membersTimeout)
		defer cancel()
		if !m.webState().probes.acquire(wait) {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "busy: other member discoveries are running"})
			return
		}
		defer m.webState().probes.release()
		ctx, cancel2 := context.WithTimeout(r.Context(), membersTimeout)
		defer cancel2()
		writeJSON(w, http.StatusOK, m.members(ctx))
	})
}
