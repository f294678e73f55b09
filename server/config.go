package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Config is what a broker sets for the member it embeds: who it is (group, id, peers), how
// it authenticates its peers, where its term and vote live, where its ledger end comes from,
// and its timings. What only the `dledger server` process adds (the HTTP admin API, the
// metrics listener, hooks) is package server/daemon's Config. Validate checks it without side
// effects.
type Config struct {
	Group  string // replica group name
	SelfID string // this member's id, one of Peers
	// Peers is DLedger's peers string: "n0-host:port;n1-host:port;n2-host:port". This member
	// listens for rpc on its own entry's address.
	Peers string
	// Keys is the group key for peer authentication: every rpc connection between members is
	// authenticated and encrypted with it (package rpc/secure), and a request must come from
	// the member its connection authenticated as. Every member needs the same key (during a
	// rotation, one key in common). Load it with secure.LoadKeyFile (`dledger keygen FILE`
	// writes one) or build it with secure.NewKeySet. Required unless Insecure.
	Keys secure.KeySet
	// MemberKey and Trust, instead of Keys, authenticate with per-member keys (docs/design.md,
	// "Member keys"): MemberKey is this member's own key pair (secure.LoadStaticKeyFile;
	// `dledger keygen --member FILE` writes one) and Trust the group's trust list, every
	// member's public key by id (secure.LoadTrustFile). A connection then proves the member
	// id it claims with that member's key, so a stolen key file speaks for its own member
	// only. Trust must list this member with MemberKey's public key, and every peer.
	// Server.ReloadPeerKeys replaces both while the member runs. Not for a member of a Host.
	MemberKey secure.StaticKey
	Trust     *secure.Trust
	// Insecure runs the member without peer authentication, as members did before it: anyone
	// who can reach the rpc port can depose the leader, burn votes or stall the group. Only
	// for a network where every host is trusted; Start logs a warning.
	Insecure bool
	// Listen, if set, is the address the rpc server binds ("0.0.0.0:20911" in a container),
	// while this member's entry in Peers stays the address the others dial (its advertised
	// address, a pod's DNS name). Empty: bind this member's own entry in Peers.
	Listen string
	// DataDir holds the durable term and vote (vote.state). Required unless WithStore is used.
	DataDir string
	// Ledger says where this member's ledger end comes from (see LedgerMode). The zero value,
	// LedgerStorage, is for a broker that embeds the member: Start refuses to run before its
	// first UpdateLedger.
	Ledger LedgerMode
	// LeaderReadyGate adds a "leader ready" step for a storage that must catch up before it
	// serves as leader (DLedger's RocketMQ integration waits for its commit log): a new leader
	// answers 503 on /v1/leader and reports "ready": false in /v1/status until the storage
	// calls Server.SetLeaderReady with the term it leads. Each new term starts not ready.
	LeaderReadyGate bool
	// Join starts a member that is being added to a running group (issue 31; `dledger server
	// --join`): Peers name this member and the members it can reach, not the configuration. It
	// never campaigns or votes until the leader, which an operator asked to add it
	// (AddNonVoter), tells it the configuration, which it then keeps in its data dir. Ignored
	// once the data dir holds a configuration (a restart). (Beside LeaderReadyGate so the two
	// share a word: a Config is kept in every member of a host.)
	Join bool
	// Profile names the timing profile the election settings start from: dledger.ProfileLAN
	// (also "") or dledger.ProfileDLedger.
	Profile string
	// Election holds the timings. Every zero field takes the profile's value, so only the
	// settings given change anything (see dledger.Config.WithDefaults).
	Election dledger.Config
}

// LedgerMode says where a member's ledger end comes from. A member must never vote or campaign
// on a ledger it does not know: after a restart the storage's ledger is unknown until it is
// reported again, and voting as if it were empty would let a stale replica win.
type LedgerMode int

const (
	// LedgerStorage: a broker embeds the member and reports its ledger with UpdateLedger. Start
	// is refused until the first UpdateLedger, so the member never runs on an unknown ledger.
	LedgerStorage LedgerMode = iota
	// LedgerSidecar: an application beside the member reports the ledger (PUT /v1/ledger). The
	// member starts, but abstains after every start until the first report: it grants no vote,
	// does not campaign and is never a hand-over target.
	LedgerSidecar
	// LedgerNone: the member has no storage (a lock service, the walk-through). Its ledger is
	// always empty, (-1, -1), and UpdateLedger is refused.
	LedgerNone
)

var ledgerModeNames = [...]string{"storage", "sidecar", "none"}

func (m LedgerMode) String() string {
	if m >= 0 && int(m) < len(ledgerModeNames) {
		return ledgerModeNames[m]
	}
	return "LedgerMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseLedgerMode is the inverse of String.
func ParseLedgerMode(s string) (LedgerMode, error) {
	for i, n := range ledgerModeNames {
		if n == s {
			return LedgerMode(i), nil
		}
	}
	return 0, fmt.Errorf("ledger mode %q: want %s", s, strings.Join(ledgerModeNames[:], ", "))
}

// settings are everything a member runs with: the resolved Config (the process's settings,
// the admin API and hooks, are package server/daemon's). A member keeps its own Group, SelfID
// and DataDir here and the rest behind Config, which the members of a host with equal
// settings share (Host.shareSettings; issue 29: a Config is 320 bytes, and a host of 10,000
// members kept as many copies of one). The fields here shadow Config's: read them through
// settings, never through Config (whose are empty when shared). Nothing changes a Config
// once New returns.
type settings struct {
	Group, SelfID, DataDir string
	*Config
}

// resolved is a Config checked and parsed once: what New builds the member from.
type resolved struct {
	settings
	peers    []memberstate.Peer
	selfAddr string
	// listenAddr is the address the rpc server binds: Listen, else selfAddr.
	listenAddr string
}

// resolve is the one place every rule of a Config is checked: the profile and timings (with
// the profile's values in the zero fields), group, ids, the peers string, self and preferred
// leaders among the peers, the ledger mode and the HTTP address's form. It touches neither
// disk nor network.
func (c Config) resolve() (resolved, error) { return c.resolveFor(false) }

// resolveFor is resolve for a member with a port of its own (hosted false), where two members
// at one address is a mistake (a request for one would reach the other), or for a member of a
// Host, whose members of one group may share the host's address (routed by id).
func (c Config) resolveFor(hosted bool) (resolved, error) {
	base, err := dledger.Profile(c.Profile)
	if err != nil {
		return resolved{}, err
	}
	c.Election = c.Election.WithDefaults(base)
	if err := c.Election.Validate(); err != nil {
		return resolved{}, err
	}
	if err := memberstate.ValidateGroup(c.Group); err != nil {
		return resolved{}, err
	}
	if err := memberstate.ValidateID(c.SelfID); err != nil {
		return resolved{}, err
	}
	peers, err := memberstate.ParsePeers(c.Peers)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{settings: settings{Group: c.Group, SelfID: c.SelfID, DataDir: c.DataDir, Config: &c}, peers: peers}
	ids, selfAddr, err := indexPeers(peers, c.SelfID, hosted)
	if err != nil {
		return resolved{}, err
	}
	r.selfAddr = selfAddr
	if !ids[c.SelfID] {
		return resolved{}, fmt.Errorf("self id %q is not in the peers list %s", c.SelfID, memberstate.FormatPeers(peers))
	}
	r.listenAddr = r.selfAddr
	if c.Listen != "" {
		if err := validateListen(c.Listen); err != nil {
			return resolved{}, err
		}
		r.listenAddr = c.Listen
	}
	for _, id := range c.Election.PreferredLeaderIDs {
		if !ids[id] {
			return resolved{}, fmt.Errorf("preferred leader %q is not a member (peers: %s)", id, memberstate.FormatPeers(peers))
		}
	}
	if err := c.checkAuth(peers, hosted); err != nil {
		return resolved{}, err
	}
	if c.Ledger < LedgerStorage || c.Ledger > LedgerNone {
		return resolved{}, fmt.Errorf("unknown ledger mode %d", c.Ledger)
	}
	return r, nil
}

// indexPeers returns the peers' ids and self's address, and refuses two members at one
// address unless hosted (see resolveFor).
func indexPeers(peers []memberstate.Peer, self string, hosted bool) (ids map[string]bool, selfAddr string, err error) {
	ids = map[string]bool{}
	addrs := map[string]string{}
	for _, p := range peers {
		if other, dup := addrs[p.Addr]; dup && !hosted {
			return nil, "", fmt.Errorf("peers: members %q and %q share the address %s", other, p.ID, p.Addr)
		}
		addrs[p.Addr] = p.ID
		ids[p.ID] = true
		if p.ID == self {
			selfAddr = p.Addr
		}
	}
	return ids, selfAddr, nil
}

// validateListen checks a Listen address: host:port with a port others can be told, so not 0
// (the others dial this member's entry in Peers, never a port picked at random). The host may
// be empty or 0.0.0.0 (every interface), or a name or address of this host.
func validateListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q is not host:port: %v", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("listen address %q: port %q is not a number in 1..65535", addr, port)
	}
	return nil
}

// checkAuth: exactly one of Keys, member keys (MemberKey and Trust) and Insecure; member keys
// only for a member with a port of its own, with a trust list that lists this member under
// its own key and every peer.
func (c Config) checkAuth(peers []memberstate.Peer, hosted bool) error {
	member := !c.MemberKey.IsZero() || c.Trust != nil
	switch {
	case c.Keys.Len() == 0 && !c.Insecure && !member:
		return errNoKey
	case c.Keys.Len() > 0 && c.Insecure:
		return errors.New("both Keys and Insecure are set: a member either authenticates its peers or not")
	case member && (c.Keys.Len() > 0 || c.Insecure):
		return errors.New("member keys (MemberKey, Trust) exclude Keys and Insecure: choose one way to authenticate peers")
	case member && hosted:
		return nil // the host's key and trust list, checked for this member by the host (keys.go)
	case member:
		return checkTrust(c.MemberKey, c.Trust, c.SelfID, peers)
	}
	return nil
}

// checkTrust checks a key pair and trust list for member self of a group of peers.
func checkTrust(key secure.StaticKey, trust *secure.Trust, self string, peers []memberstate.Peer) error {
	switch {
	case key.IsZero():
		return errors.New("member keys need this member's key pair (MemberKey) as well as the trust list")
	case trust == nil:
		return errors.New("member keys need the group's trust list (Trust) as well as this member's key pair")
	}
	if _, err := secure.NewIdentity(key, trust, self); err != nil {
		return err
	}
	for _, p := range peers {
		if trust.Keys(p.ID) == nil {
			return fmt.Errorf("member %q is not in the trust list: it could never connect (list its public key)", p.ID)
		}
	}
	return nil
}

// errNoKey: secure by default, a member does not start without a key unless told it is insecure.
var errNoKey = errors.New("peer authentication needs a key: set Config.Keys (secure.LoadKeyFile reads a key file, " +
	"secure.NewKeySet builds one) or member keys (Config.MemberKey and Config.Trust), or set Config.Insecure to run without it")

// Validate checks everything in c that can be checked without touching the disk or the
// network (see resolve). New calls it first, so a bad config creates no data dir and registers
// no metrics; a command line can call it to tell a usage error from a runtime one. DataDir is
// checked by New (it is optional with WithStore).
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// ElectionConfig is the election timing New will use: the profile's values with c.Election's
// non-zero fields in their place.
func (c Config) ElectionConfig() (dledger.Config, error) {
	r, err := c.resolve()
	return r.Election, err
}
