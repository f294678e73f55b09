package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Membership changes carry member keys (issue 32, docs/protocol.md 13.9). A member that
// authenticates with member keys in a process of its own trusts, for each member of its
// configurations (committed and pending: the members its transport reaches), the keys its
// trust file lists for that id, or else the key the configuration carries for it; and no one
// else. So a member added with its key is trusted by every member as soon as that member
// stores the configuration that adds it, and a member removed loses its links as soon as a
// member stores the configuration without it, whatever its trust file says. Nothing here
// touches the elector: the trust follows the configuration as the transport does
// (applyMembership).
//
// The trust file wins for the ids it lists: it is how an operator rotates a key (ReloadPeerKeys),
// and the one place a key can be changed without a membership change. A trust file line whose
// keys do not include the configuration's key for that member is a conflict, logged at
// warning level (once per distinct set of conflicts): one of the two is stale.

// memberTrust is what a member keeps of its trust: its key pair, its trust file's list, and
// the composition last applied.
type memberTrust struct {
	mu      sync.Mutex
	key     secure.StaticKey
	file    *secure.Trust // Config.Trust, then each ReloadPeerKeys's
	applied string        // fingerprint of the trust list in force ("": none composed yet)
	warned  string        // the conflicts last logged
	// members are a host's members (PerMemberLinks) whose configurations the trust follows:
	// each registers itself when it first wires its transport, and leaves when it stops. (Not
	// the host's own list: AddGroup holds the host's lock while New wires.)
	members map[*Server]struct{}
}

// composeTrust is the trust list of member self holding m: for each member (membershipPeers,
// self included), the file's keys if it lists the id, else the key the configuration carries.
// It also returns the conflicts, one sentence each: a file line that disagrees with the
// configuration, a configuration key that is already another member's, a member with no key.
func composeTrust(file *secure.Trust, m Membership, initial []memberstate.Peer, self string) (*secure.Trust, []string, error) {
	ids := []string{self}
	for _, p := range membershipPeers(m, initial) {
		if p.ID != self {
			ids = append(ids, p.ID)
		}
	}
	c := composition{entries: map[string][]secure.PublicKey{}, owner: map[secure.PublicKey]string{}}
	for _, id := range ids { // the file first: it wins
		if keys := file.Keys(id); keys != nil {
			c.entries[id] = keys
			for _, k := range keys {
				c.owner[k] = id
			}
		}
	}
	carried := carriedKeys(m)
	for _, id := range ids {
		c.addCarried(id, carried[id])
	}
	t, err := secure.NewTrust(c.entries)
	return t, c.conflicts, err
}

// carriedKeys are the keys m's configurations carry, by member id (the committed one's first).
func carriedKeys(m Membership) map[string]string {
	carried := map[string]string{}
	for _, k := range m.Keys {
		carried[k.ID] = k.Key
	}
	if m.Pending != nil {
		for _, k := range m.Pending.Keys {
			if carried[k.ID] == "" {
				carried[k.ID] = k.Key
			}
		}
	}
	return carried
}

// composition is a trust list being composed, and its conflicts.
type composition struct {
	entries   map[string][]secure.PublicKey
	owner     map[secure.PublicKey]string
	conflicts []string
}

// addCarried adds member id's key as its configuration carries it (c, "" if none), unless the
// file listed id (it wins: a disagreement is a conflict) or another id has the key.
func (c *composition) addCarried(id, carried string) {
	if carried == "" {
		if c.entries[id] == nil {
			c.conflicts = append(c.conflicts, fmt.Sprintf("member %s has no key: neither the trust file nor the configuration lists one", id))
		}
		return
	}
	k, err := secure.ParsePublicKey(carried)
	if err != nil { // the configuration was checked when stored: cannot happen
		c.conflicts = append(c.conflicts, fmt.Sprintf("member %s: the configuration's key: %v", id, err))
		return
	}
	switch other, used := c.owner[k]; {
	case c.entries[id] != nil && !slices.Contains(c.entries[id], k):
		c.conflicts = append(c.conflicts, fmt.Sprintf("member %s: the trust file lists %s, the configuration %s; the trust file's is in force",
			id, keyIDs(c.entries[id]), k.ID()))
	case c.entries[id] != nil:
	case used:
		c.conflicts = append(c.conflicts, fmt.Sprintf("member %s: the configuration's key %s is %s's in the trust file; %s is not trusted", id, k.ID(), other, id))
	default:
		c.entries[id], c.owner[k] = []secure.PublicKey{k}, id
	}
}

func keyIDs(keys []secure.PublicKey) string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID()
	}
	return strings.Join(ids, ",")
}

// trustFingerprint names a trust list's content: equal lists have equal fingerprints.
func trustFingerprint(t *secure.Trust) string {
	var b strings.Builder
	for _, id := range t.IDs() {
		b.WriteString(id)
		for _, k := range t.Keys(id) {
			b.WriteString(" " + k.String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// followTrust makes the trust in force the composition for the member's configuration now,
// if it changed: connections it no longer accepts (a removed member's) close at once
// (rpc.PeerKeys.Reload). The first composition makes a fresh identity: a trust file line
// of no member is not "revoked", only not trusted.
func (s *Server) followTrust() {
	t := s.ownTrust()
	if t == nil {
		if s.host != nil && s.host.trust != nil {
			s.host.followTrust(s)
		}
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := s.applyTrust(t.key, t.file); err != nil {
		s.logAt(zap.ErrorLevel).Error("member keys: the trust list cannot follow the configuration; the one in force stays", zap.Error(err))
	}
}

// applyTrust composes key and file with the configuration and makes it the identity in
// force; t.mu is held. It returns how many connections the change closed.
func (s *Server) applyTrust(key secure.StaticKey, file *secure.Trust) (closed int, err error) {
	trust, conflicts, err := composeTrust(file, s.elector.Membership(), s.mem.initial, s.cfg.SelfID)
	if err != nil {
		return 0, err
	}
	return s.ownTrust().apply(s.peerKeys, s.cfg.SelfID, key, trust, conflicts, s.logger())
}

// apply makes key and trust (composed, with its conflicts) the identity in force of pk, for
// self ("" on a host), if they changed; t.mu is held. It returns how many connections the
// change closed.
func (t *memberTrust) apply(pk *rpc.PeerKeys, self string, key secure.StaticKey, trust *secure.Trust,
	conflicts []string, log *zap.Logger) (closed int, err error) {
	if w := strings.Join(conflicts, "; "); w != t.warned {
		if w != "" {
			log.Warn("member keys: the trust file and the configuration disagree", zap.Strings("conflicts", conflicts))
		}
		t.warned = w
	}
	fp := key.Public().String() + "\n" + trustFingerprint(trust)
	if fp == t.applied {
		return 0, nil
	}
	var next *secure.Identity
	if t.applied == "" {
		next, err = secure.NewIdentity(key, trust, self)
	} else {
		next, err = pk.Identity().Next(key, trust, self)
	}
	if err != nil {
		return 0, err
	}
	closed = pk.Reload(next)
	if t.applied != "" {
		log.Info("member keys: the trust list follows the configuration", zap.Strings("trusted", trust.IDs()),
			zap.Int("closedConnections", closed))
	}
	t.applied = fp
	return closed, nil
}

// followTrust is Server.followTrust for a host with PerMemberLinks (the `dledger server`
// process is one, of one member): its trust list is shared by its members, so it is the union
// of each member's composition (member ids are a group's; an id two groups of the host share
// keeps the first member's keys). joining is the member asking, which New may not have
// registered yet.
func (h *Host) followTrust(joining *Server) {
	t := h.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.members == nil {
		t.members = map[*Server]struct{}{}
	}
	t.members[joining] = struct{}{}
	if _, err := h.applyTrust(t.key, t.file, joining); err != nil {
		h.log.Error("member keys: the trust list cannot follow the configurations; the one in force stays", zap.Error(err))
	}
}

func (h *Host) applyTrust(key secure.StaticKey, file *secure.Trust, joining *Server) (int, error) {
	trust, conflicts, err := h.composeTrust(file, joining)
	if err != nil {
		return 0, err
	}
	return h.trust.apply(h.peerKeys, "", key, trust, conflicts, h.log)
}

// leaveTrust is a stopping member leaving the host's trust: the peers only it had are no
// longer trusted.
func (h *Host) leaveTrust(s *Server) {
	t := h.trust
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.members[s]; !ok {
		return
	}
	delete(t.members, s)
	if _, err := h.applyTrust(t.key, t.file, nil); err != nil {
		h.log.Error("member keys: the trust list cannot follow the configurations; the one in force stays", zap.Error(err))
	}
}

// composeTrust is the union of the compositions of the host's registered members; t.mu is
// held.
func (h *Host) composeTrust(file *secure.Trust, _ *Server) (*secure.Trust, []string, error) {
	var ms []*Server
	for s := range h.trust.members {
		ms = append(ms, s)
	}
	slices.SortFunc(ms, func(a, b *Server) int {
		return strings.Compare(a.cfg.Group+"\x00"+a.cfg.SelfID, b.cfg.Group+"\x00"+b.cfg.SelfID)
	})
	if len(ms) == 0 {
		return file, nil, nil
	}
	entries := map[string][]secure.PublicKey{}
	owner := map[secure.PublicKey]string{}
	var conflicts []string
	for _, s := range ms {
		if !s.mem.ready.Load() {
			continue
		}
		tr, c, err := composeTrust(file, s.elector.Membership(), s.mem.initial, s.cfg.SelfID)
		if err != nil {
			return nil, nil, err
		}
		conflicts = append(conflicts, c...)
		for _, id := range tr.IDs() {
			keys := tr.Keys(id)
			if entries[id] != nil || slices.ContainsFunc(keys, func(k secure.PublicKey) bool { return owner[k] != "" }) {
				continue
			}
			entries[id] = keys
			for _, k := range keys {
				owner[k] = id
			}
		}
	}
	if len(entries) == 0 {
		return file, conflicts, nil
	}
	t, err := secure.NewTrust(entries)
	return t, conflicts, err
}

// reloadTrust is Host.ReloadPeerKeys with PerMemberLinks: key and file replace the ones in
// force, composed with every member's configurations, if every member's peers keep a key.
func (h *Host) reloadTrust(key secure.StaticKey, file *secure.Trust) (int, error) {
	t := h.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := secure.NewIdentity(key, file, ""); err != nil {
		return 0, err
	}
	trust, _, err := h.composeTrust(file, nil)
	if err != nil {
		return 0, err
	}
	for s := range t.members {
		if err == nil {
			err = checkTrust(key, trust, s.cfg.SelfID, s.currentPeers())
		}
	}
	if err != nil {
		return 0, err
	}
	closed, err := h.applyTrust(key, file, nil)
	if err != nil {
		return 0, err
	}
	t.key, t.file = key, file
	h.log.Info("peer keys reloaded", zap.String("memberKeyId", key.Public().ID()),
		zap.Strings("trusted", h.peerKeys.Identity().Trust().IDs()), zap.Int("closedConnections", closed))
	return closed, nil
}

// trustState is the trust this member's keys follow: its own, its host's (PerMemberLinks), or
// nil (no member keys, or host links, whose trust lists name hosts).
func (s *Server) trustState() *memberTrust {
	if t := s.ownTrust(); t != nil || s.host == nil {
		return t
	}
	return s.host.trust
}

// reloadTrust is ReloadPeerKeys for a member with a trust of its own: key and file replace
// the ones in force, composed with the configuration, if every member still has a key.
func (s *Server) reloadTrust(key secure.StaticKey, file *secure.Trust) (int, error) {
	t := s.ownTrust()
	t.mu.Lock()
	defer t.mu.Unlock()
	if file == nil || key.IsZero() {
		return 0, checkTrust(key, file, s.cfg.SelfID, nil)
	}
	if _, err := secure.NewIdentity(key, file, s.cfg.SelfID); err != nil {
		return 0, err
	}
	trust, _, err := composeTrust(file, s.elector.Membership(), s.mem.initial, s.cfg.SelfID)
	if err != nil {
		return 0, err
	}
	for _, p := range s.currentPeers() {
		if trust.Keys(p.ID) == nil {
			return 0, fmt.Errorf("member %q is not in the trust list: it could never connect (list its public key)", p.ID)
		}
	}
	closed, err := s.applyTrust(key, file)
	if err != nil {
		return 0, err
	}
	t.key, t.file = key, file
	s.logAt(zap.InfoLevel).Info("peer keys reloaded", zap.String("memberKeyId", key.Public().ID()),
		zap.Strings("trusted", s.peerKeys.Identity().Trust().IDs()), zap.Int("closedConnections", closed))
	return closed, nil
}

// storedKeys returns cfg.Trust with the keys of the members of the configuration in cfg's
// data dir (or store) that it does not list, so that a member restarted with peers that
// include a member added with its key (docs/protocol.md 13.9) passes the start's check that
// every peer has a key. Anything unreadable is left for the store to report.
func storedKeys(cfg Config, store memberstate.Store) *secure.Trust {
	var d memberstate.DurableConfig
	var found bool
	owner := memberstate.Owner{Group: cfg.Group, SelfID: cfg.SelfID}
	if cs, ok := store.(memberstate.ConfigStore); ok {
		d, found, _ = cs.LoadConfig()
	} else if store == nil && cfg.DataDir != "" {
		d, found, _ = memberstate.ReadConfig(cfg.DataDir, owner)
	}
	if !found {
		return cfg.Trust
	}
	entries := map[string][]secure.PublicKey{}
	for _, id := range cfg.Trust.IDs() {
		entries[id] = cfg.Trust.Keys(id)
	}
	all := d.Committed.Keys
	if d.Pending != nil {
		all = append(slices.Clone(all), d.Pending.Keys...)
	}
	for _, c := range all {
		k, err := secure.ParsePublicKey(c.Key)
		if err != nil || entries[c.ID] != nil || cfg.Trust.OwnerOf(k) != "" {
			continue
		}
		entries[c.ID] = []secure.PublicKey{k}
	}
	t, err := secure.NewTrust(entries)
	if err != nil {
		return cfg.Trust
	}
	return t
}

// AddNonVoterWithKey is AddNonVoter for a group that authenticates with member keys: key is
// the new member's public key, which the configuration carries, so that every member trusts
// it once it stores the change, and forgets it when the member is removed
// (docs/protocol.md 13.9). It is refused (ErrInvalidChange) on a member that does not use
// member keys of its own (a group key, or a host of many groups, whose trust lists name hosts),
// for a key that is already another member's, and for a key that disagrees with the
// leader's trust file's line for id. The new member's trust file lists itself and the
// members it dials.
func (s *Server) AddNonVoterWithKey(ctx context.Context, id, addr string, key secure.PublicKey) (Configuration, error) {
	change := dledger.Change{Kind: dledger.AddNonVoter, ID: id, Addr: addr, Key: key.String()}
	if err := s.checkAddKey(id, key); err != nil && s.leads() { // a follower's answer is the leader's address
		return Configuration{}, &MembershipError{Op: "add", ID: id, Err: err, Config: s.committed()}
	}
	return s.changeMembership(ctx, change)
}

// checkAddKey is AddNonVoterWithKey's check against this member's own trust.
func (s *Server) checkAddKey(id string, key secure.PublicKey) error {
	switch {
	case s.peerKeys == nil:
		return fmt.Errorf("%w: a key was given, but this group does not authenticate with member keys", dledger.ErrInvalidChange)
	case s.trustState() == nil:
		return fmt.Errorf("%w: on a host of many groups the trust lists name hosts, not members: list the new host's key in every host's trust file instead", dledger.ErrInvalidChange)
	case key == (secure.PublicKey{}):
		return fmt.Errorf("%w: the key is all zeros", dledger.ErrInvalidChange)
	}
	ts := s.trustState()
	ts.mu.Lock()
	file := ts.file
	ts.mu.Unlock()
	trust := s.peerKeys.Identity().Trust()
	for _, t := range []*secure.Trust{trust, file} {
		if other := t.OwnerOf(key); other != "" && other != id {
			return fmt.Errorf("%w: key %s is member %s's already: each member needs its own key", dledger.ErrInvalidChange, key.ID(), other)
		}
	}
	if keys := file.Keys(id); keys != nil && !slices.Contains(keys, key) {
		return fmt.Errorf("%w: this member's trust file lists %s with key %s, not %s: fix or remove that line first (the trust file wins)",
			dledger.ErrInvalidChange, id, keyIDs(keys), key.ID())
	}
	return nil
}

// checkAddWithoutKey refuses, on a member that authenticates with member keys of its own, an
// add of a member that neither the trust file nor a key given lists: it could never connect.
func (s *Server) checkAddWithoutKey(id string) error {
	ts := s.trustState()
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	file := ts.file
	ts.mu.Unlock()
	if file.Keys(id) == nil {
		return fmt.Errorf("%w: %s has no key: this group authenticates with member keys; give its public key with the add (dledger members add --key), or list it in every member's trust file",
			dledger.ErrInvalidChange, id)
	}
	return nil
}

// leads: this member leads now (the key checks are the leader's: a follower refuses the
// change with the leader's address instead).
func (s *Server) leads() bool { return s.elector.Status().Role == protocol.LEADER }

// committed is the committed configuration this member holds.
func (s *Server) committed() Configuration {
	m := s.elector.Membership()
	return Configuration{Epoch: m.Epoch, Term: m.ConfTerm, Voters: m.Voters, NonVoters: m.NonVoters, Forced: m.Forced, Keys: m.Keys}
}
