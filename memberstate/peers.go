package memberstate

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Peer is one member of a replica group: its id and its rpc address (host:port).
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers parses DLedger's peers string `n0-host:port;n1-host:port;...`. The id ends at the
// first '-'. A trailing ';' is tolerated (hand-written configs often have one); anything else
// malformed is an error that names the offending item.
func ParsePeers(s string) ([]Peer, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("peers: empty; want \"n0-host:port;n1-host:port;...\"")
	}
	items := strings.Split(strings.TrimSuffix(s, ";"), ";")
	peers := make([]Peer, 0, len(items))
	for i, raw := range items {
		item := strings.TrimSpace(raw)
		if item == "" {
			return nil, fmt.Errorf("peers: item %d is empty in %q", i+1, s)
		}
		id, addr, ok := strings.Cut(item, "-")
		if !ok {
			return nil, fmt.Errorf("peers: item %q has no '-' between id and address (want id-host:port)", item)
		}
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	if err := validatePeers(peers); err != nil {
		return nil, err
	}
	return peers, nil
}

// validatePeers checks a member list, however it was built: at least one member, every id
// valid (ValidateID) and every address host:port, and no two members sharing an id. Two
// members may share an address: a host of groups serves several members of one group on one
// port, routed by id (docs/protocol.md 4.1); a member with a port of its own refuses that
// (server.Config). Errors name the offending member as it would appear in a peers string.
func validatePeers(peers []Peer) error {
	if len(peers) == 0 {
		return fmt.Errorf("peers: no members")
	}
	// The item's text only for an error, and no set of ids for a short list: a host of 10,000
	// groups parses its members' peers three times each at its start (issue 29).
	var ids map[string]bool
	if len(peers) > smallPeers {
		ids = make(map[string]bool, len(peers))
	}
	for i, p := range peers {
		if err := ValidateID(p.ID); err != nil {
			return fmt.Errorf("peers: item %q: %w", p.ID+"-"+p.Addr, err)
		}
		if err := validateAddr(p.Addr); err != nil {
			return fmt.Errorf("peers: item %q: %w", p.ID+"-"+p.Addr, err)
		}
		if ids == nil {
			for _, q := range peers[:i] {
				if q.ID == p.ID {
					return fmt.Errorf("peers: duplicate member id %q", p.ID)
				}
			}
			continue
		}
		if ids[p.ID] {
			return fmt.Errorf("peers: duplicate member id %q", p.ID)
		}
		ids[p.ID] = true
	}
	return nil
}

// smallPeers: a list this long or shorter is checked for duplicate ids pair by pair.
const smallPeers = 16

// FormatPeers is the inverse of ParsePeers.
func FormatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "-" + p.Addr
	}
	return strings.Join(parts, ";")
}

// ValidateID checks a member id: non-empty, and none of the characters the peers string and
// DLedger's tooling use as separators ('-', ';', '#', white space).
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("member id is empty")
	}
	if len(id) > 64 {
		return fmt.Errorf("member id %q is longer than 64 bytes", id)
	}
	if i := strings.IndexAny(id, "-;# \t\r\n"); i >= 0 {
		return fmt.Errorf("member id %q contains %q, which is not allowed in an id", id, id[i])
	}
	return nil
}

// ValidateGroup checks a group name, with the same character rules as an id.
func ValidateGroup(g string) error {
	if g == "" {
		return fmt.Errorf("group name is empty")
	}
	if len(g) > 128 {
		return fmt.Errorf("group name %q is longer than 128 bytes", g)
	}
	if i := strings.IndexAny(g, ";# \t\r\n"); i >= 0 {
		return fmt.Errorf("group name %q contains %q, which is not allowed", g, g[i])
	}
	return nil
}

func validateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q is not host:port: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q: port %q is not a number in 1..65535", addr, port)
	}
	return nil
}
