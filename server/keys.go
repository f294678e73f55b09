package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Member keys (Config.MemberKey, Config.Trust) while the member runs: the identity its rpc
// server and client authenticate with, and its replacement (ReloadPeerKeys).

// StaticKey is a member's own key pair (Config.MemberKey); Trust a group's trust list
// (Config.Trust).
type (
	StaticKey = secure.StaticKey
	Trust     = secure.Trust
)

// LoadMemberKeyFile reads a member's private key file (`dledger keygen --member FILE` writes
// one) for Config.MemberKey; a file group or others may read is refused.
func LoadMemberKeyFile(path string) (StaticKey, error) { return secure.LoadStaticKeyFile(path) }

// LoadTrustFile reads a group's trust list (one "id public-key..." line per member) for
// Config.Trust.
func LoadTrustFile(path string) (*Trust, error) { return secure.LoadTrustFile(path) }

func newPeerKeys(key secure.StaticKey, trust *secure.Trust, self string) (*rpc.PeerKeys, error) {
	id, err := secure.NewIdentity(key, trust, self)
	if err != nil {
		return nil, err
	}
	return rpc.NewPeerKeys(id)
}

func memberKeyID(pk *rpc.PeerKeys) string {
	if pk == nil {
		return ""
	}
	return pk.Identity().Public().ID()
}

// ErrNoMemberKeys: ReloadPeerKeys on a member that does not authenticate with member keys.
var ErrNoMemberKeys = errors.New("this member does not use member keys (Config.MemberKey, Config.Trust)")

// reloadMu orders reloads of one process's members: two reloads racing would each compute
// the revoked keys from the identity before either.
var reloadMu sync.Mutex

// ReloadPeerKeys replaces this member's key pair and trust list while it runs, with
// Config's rules (the trust list lists this member under key, and every peer). Handshakes
// from then on use them; every open rpc connection whose peer authenticated with a key the
// new trust list no longer accepts for it is closed at once (counted in
// dledger_auth_failures_total{reason="revoked"}), and the others stay up: the elector never
// notices a reload that revokes nobody it talks to. It returns how many connections it
// closed. On an error nothing changes.
//
// To replace member M's key without downtime: add M's new public key to M's line in every
// member's trust list and reload them all; give M its new key pair and reload M (its own
// connections are replaced by ones made with the new key before the reload returns:
// rpc.PeerKeys.Reload); then drop M's old key from every line and reload them all (the
// connections they dialled to M, which authenticated M's old key, are replaced likewise). To revoke M, drop its line's keys (or give it a key
// nobody holds) and reload every member.
func (s *Server) ReloadPeerKeys(key StaticKey, trust *Trust) (closed int, err error) {
	if s.peerKeys == nil {
		return 0, ErrNoMemberKeys
	}
	if s.host != nil {
		return s.host.ReloadPeerKeys(key, trust) // its members share the host's keys
	}
	reloadMu.Lock()
	defer reloadMu.Unlock()
	defer awaitReplacements(s.peerKeys)
	if s.ownTrust() != nil { // the trust follows the configuration too (member_trust.go)
		return s.reloadTrust(key, trust)
	}
	if err := checkTrust(key, trust, s.cfg.SelfID, s.currentPeers()); err != nil {
		return 0, err
	}
	next, err := s.peerKeys.Identity().Next(key, trust, s.cfg.SelfID)
	if err != nil {
		return 0, err
	}
	closed = s.peerKeys.Reload(next)
	s.logAt(zap.InfoLevel).Info("peer keys reloaded", zap.String("memberKeyId", key.Public().ID()),
		zap.Strings("trusted", trust.IDs()), zap.Int("closedConnections", closed))
	return closed, nil
}

// replacementWait bounds how long a reload waits for the links it replaces (make-before-break:
// rpc.PeerKeys.Reload) to be up on the new keys: a dial and a handshake, with room for a
// loaded machine.
const replacementWait = 5 * time.Second

// awaitReplacements waits, at most replacementWait, until the connections a reload replaces
// are up on the new keys, so that when a reload returns (and the SIGHUP's log line says it is
// done) the old key carries no link of this member's and the next step of a rotation may drop
// it without closing one.
func awaitReplacements(pk *rpc.PeerKeys) {
	ctx, cancel := context.WithTimeout(context.Background(), replacementWait)
	defer cancel()
	_ = pk.AwaitReplacements(ctx) // past the bound the old order applies: the next step closes what is left
}

// memberPeerKeys is the PeerKeys a member authenticates with: nil without member keys, the
// host's on a host (checked for this member: checkMemberKeys), else its own.
func memberPeerKeys(cfg Config, peers []memberstate.Peer, host *Host, store memberstate.Store) (*rpc.PeerKeys, error) {
	if cfg.MemberKey.IsZero() {
		return nil, nil
	}
	if host != nil {
		id := host.peerKeys.Identity()
		trust := id.Trust()
		if host.trust != nil { // a member added with its key is listed by the stored configuration
			trust = storedKeys(Config{Group: cfg.Group, SelfID: cfg.SelfID, DataDir: cfg.DataDir, Trust: trust}, store)
		}
		if err := host.checkMemberKeys(id.Key(), trust, cfg.SelfID, peers); err != nil {
			return nil, err
		}
		return host.peerKeys, nil
	}
	return newPeerKeys(cfg.MemberKey, cfg.Trust, cfg.SelfID)
}

// checkAuth is a HostConfig's Config.checkAuth: exactly one of Keys, member keys (MemberKey
// and Trust) and Insecure.
func (cfg HostConfig) checkAuth() error {
	member := !cfg.MemberKey.IsZero() || cfg.Trust != nil
	switch {
	case cfg.Keys.Len() == 0 && !cfg.Insecure && !member:
		return errNoKey
	case cfg.Keys.Len() > 0 && cfg.Insecure:
		return errors.New("host: both Keys and Insecure are set")
	case member && (cfg.Keys.Len() > 0 || cfg.Insecure):
		return errors.New("host: member keys (MemberKey, Trust) exclude Keys and Insecure: choose one way to authenticate peers")
	case member && cfg.MemberKey.IsZero():
		return errors.New("host: member keys need the host's key pair (MemberKey) as well as the trust list")
	case member && cfg.Trust == nil:
		return errors.New("host: member keys need the trust list (Trust) as well as the host's key pair")
	}
	return nil
}

// selfID is the id a host's trust list names it by: its host id with host links; with
// PerMemberLinks its members' own ids, checked as each joins ("" here).
func (h *Host) selfID() string { return h.cfg.keysID() }

func (cfg HostConfig) keysID() string {
	switch {
	case cfg.PerMemberLinks:
		return ""
	case cfg.Advertise != "":
		return cfg.Advertise
	}
	return cfg.Listen
}

// ValidateHostKeys checks a HostConfig's authentication settings as NewHost does, without
// building anything: one of Keys, member keys and Insecure, and with member keys a trust list
// that lists the host's key (under its host id, with host links).
func ValidateHostKeys(cfg HostConfig) error {
	if err := cfg.checkAuth(); err != nil {
		return err
	}
	if cfg.MemberKey.IsZero() {
		return nil
	}
	if _, err := secure.NewIdentity(cfg.MemberKey, cfg.Trust, cfg.keysID()); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// initPeerKeys builds the host's PeerKeys (nil without member keys).
func (h *Host) initPeerKeys() (*rpc.PeerKeys, error) {
	if h.cfg.MemberKey.IsZero() {
		return nil, nil
	}
	pk, err := newPeerKeys(h.cfg.MemberKey, h.cfg.Trust, h.selfID())
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if h.cfg.PerMemberLinks { // member ids in the trust list: it follows the configurations
		h.trust = &memberTrust{key: h.cfg.MemberKey, file: h.cfg.Trust}
	}
	return pk, nil
}

// checkMemberKeys checks the host's key pair and trust list for its member self of a group
// of peers. With PerMemberLinks each member connects as itself (version 3 with its group):
// the trust list must list self under the host's key, and every peer by its member id. With
// host links the members' connections are the host's: the trust list must list the host of
// every peer by its host id (the address its peers entry names).
func (h *Host) checkMemberKeys(key secure.StaticKey, trust *secure.Trust, self string, peers []memberstate.Peer) error {
	if h.cfg.PerMemberLinks {
		return checkTrust(key, trust, self, peers)
	}
	for _, p := range peers {
		if trust.Keys(p.Addr) == nil {
			return fmt.Errorf("host of member %q: %q, the host of member %q, is not in the trust list: host links are authenticated by host ids", self, p.Addr, p.ID)
		}
	}
	return nil
}

// ReloadPeerKeys is Server.ReloadPeerKeys for every member of the host at once (they share
// the host's key pair and trust list): the new pair must be listed under the host's id (host
// links) or under each member's id (PerMemberLinks), and every member's peers must be listed.
func (h *Host) ReloadPeerKeys(key StaticKey, trust *Trust) (closed int, err error) {
	if h.peerKeys == nil {
		return 0, ErrNoMemberKeys
	}
	reloadMu.Lock()
	defer reloadMu.Unlock()
	if h.trust != nil { // PerMemberLinks: the trust follows the configurations (member_trust.go)
		defer awaitReplacements(h.peerKeys)
		return h.reloadTrust(key, trust)
	}
	h.mu.Lock()
	for _, g := range h.groups { // first: its error names the member
		for _, s := range g {
			if err == nil {
				err = h.checkMemberKeys(key, trust, s.cfg.SelfID, s.currentPeers())
			}
		}
	}
	h.mu.Unlock()
	if err != nil {
		return 0, err
	}
	next, err := h.peerKeys.Identity().Next(key, trust, h.selfID())
	if err != nil {
		return 0, err
	}
	closed = h.peerKeys.Reload(next)
	awaitReplacements(h.peerKeys)
	h.log.Info("peer keys reloaded", zap.String("memberKeyId", key.Public().ID()),
		zap.Strings("trusted", trust.IDs()), zap.Int("closedConnections", closed))
	return closed, nil
}
