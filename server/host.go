package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger/campaign"
	"github.com/dledger-go/dledger/dledger/driver"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// HostConfig is what a process hosting many group members sets once for all of them
// (docs/design.md, "The host as built").
type HostConfig struct {
	// Listen is the rpc address every hosted member is reached at, host:port. Each member's
	// entry in its own Peers must name this address.
	Listen string
	// DataDir is the root of the members' data dirs: a member's vote file is in
	// DataDir/groups/<group>/<id>/ (path-escaped), or in DataDir itself if DataDir is a
	// single member's data dir of today's layout and its vote.state names that member.
	DataDir string
	// Keys is the key set every group on this host uses (peer authentication), or Insecure.
	Keys     KeySet
	Insecure bool
	// MemberKey and Trust, instead of Keys, authenticate with static keys (docs/design.md,
	// "Member keys"): the host's one key pair, and a trust list that names it under this
	// host's id (host links) or under its one member's id (PerMemberLinks), and every peer
	// the same way. Host.ReloadPeerKeys replaces both while the host runs.
	MemberKey StaticKey
	Trust     *Trust
	// MaxConns and MaxConnsPerIP bound the rpc listener's open connections, in all and from
	// one source address (defaults 4096 and 2048; see rpc.ServerOptions). With host links a
	// peer host needs one connection, whatever the groups shared; with PerMemberLinks, or
	// from single-member processes, one per pair of members (docs/design.md, "The host as
	// built").
	MaxConns, MaxConnsPerIP int
	// Advertise is this host's id: its rpc address as the members' peers strings name it
	// (default Listen). Every hosted member's own peers entry must name it, and the other
	// hosts dial it and name it in their host link handshakes (host_link.go).
	Advertise string
	// PerMemberLinks turns host links off: each member keeps its own rpc client, with a
	// connection and a version 1 handshake per pair of members, as a single-member process
	// does. For peers that are single-member processes (server.New, version 1 only), which
	// refuse a host link's handshake.
	PerMemberLinks bool
	// LivenessInterval is how often the host sends each peer host a host heartbeat, its
	// liveness table's frame (host_live.go; default the lan profile's heartbeat interval,
	// 200 ms). A peer host is fresh while heard within three intervals (the lan profile's
	// detection window), which bounds how long a quiet follower trusts its leader's host:
	// keep it at most the smallest heartbeat interval of the groups hosted (with a leak of 3
	// or more, as both profiles have), or their failover waits for the table rather than
	// their own detection window.
	LivenessInterval time.Duration
	// Workers bounds the rpc handler goroutines (default 256; a member's own port has 8): they
	// start as requests wait and leave after a second without work (rpc.ServerOptions.Workers),
	// so a settled host keeps few. A vote request's handler waits for the grant's durable write, so after a host crash
	// thousands of grants arrive at once, and each worker holds one in the vote journal's
	// batch: with 8, grants took a fsync per 8 (docs/design.md, "The data dir").
	Workers int
	// VoteFiles keeps a vote file per member (DataDir/groups/<group>/<id>/vote.state, the
	// layout before the vote journal) instead of the host's vote journal (DataDir/votes):
	// one fdatasync per vote write, for comparison and for hosts of few groups.
	VoteFiles bool
	// NoBalance turns the leader balancer off (host_balance.go; on by default).
	NoBalance bool
	// MaxCampaigns bounds the vote rounds the host's members run at once (default 2,048, from 512
	// at the host's start until a quiet spell; below zero: no bound): a candidate finding every
	// place taken waits, in order, before it writes
	// a new term or asks for votes, so that in a mass election the rounds that run finish
	// within their deadlines (host_campaigns.go, docs/protocol.md 12.6).
	MaxCampaigns int
	// OnPeerHostGone, if set, is called as the host learns that a peer host's process is gone
	// (its link's connection closed), before any member hears: the groups that host led elect
	// here in the moments that follow, and the process may ready itself for that burst
	// (cmd/dledger raises its collector's pace, server_gcpace.go). It must not block.
	OnPeerHostGone func(host string)
}

// hostMaxInflightPerConn bounds the requests of one connection queued or in a handler on a
// host's listener: a host link carries every group two hosts share, so a cold start or a host's
// crash sends thousands of vote requests on it at once. With a member's 64, the link was
// throttled and then closed as a flood (its unread backlog passed 256 KiB), failing every
// group's calls on it: a cold start of 10,000 groups elected 3 % of them in 5 minutes.
const hostMaxInflightPerConn = 4096

const (
	defaultHostMaxConns      = 4096
	defaultHostMaxConnsPerIP = 2048
	defaultHostWorkers       = 256
)

// Host serves many members, of one or many groups, on one rpc port and one data dir root: a
// broker's replica groups in one process (issue 29; DLedger's proxy). AddGroup adds a member
// with today's member API (*Server), RemoveGroup stops and removes one. Each member keeps its
// own elector, vote file, rpc client, role events and metrics series; the rpc listener, the
// key set and the data dir root are the host's.
type Host struct {
	cfg      HostConfig
	log      *zap.Logger
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
	mux      *rpc.Mux
	peerKeys *rpc.PeerKeys // member keys (keys.go): the rpc server's, its links' and its members' clients'
	trust    *memberTrust  // member keys with PerMemberLinks: the trust follows the members' configurations (member_trust.go)
	rpcSrv   *rpc.Server
	// maint is the host's one StateMaintainer: one goroutine and one timer for all its
	// members, which wakes only for the members whose pass is due (driver.Maintainer).
	maint *driver.Maintainer
	// campaigns bounds the members' vote rounds run at once (host_campaigns.go); nil: none.
	campaigns *campaign.Gate
	links     *hostLinks // nil with PerMemberLinks (host_link.go)
	live      *hostLive  // the liveness table's driver, with links (host_live.go)
	hostID    string
	stopRun   context.CancelFunc
	runDone   chan struct{}
	// memberOpts are NewHost's WithAttacher, given to every member.
	memberOpts []Option
	// hostSeries are the host-wide series (host_series.go); nil: not registered.
	hostSeries *metrics.Host
	// memberKinds counts the members by kind (membership.go); nil: not registered.
	memberKinds *metrics.HostMembership

	mu    sync.Mutex
	state int // 0 new, 1 started, 2 stopped
	// groups are the members on this host by group, a slice searched in order (a group has
	// one member on a host, mostly), not a map keyed by group and id beside one of a member
	// of each group (issue 29: two map entries a member). A group's first member is the one
	// AddGroup compares a new member of that group with (samePeers); nmembers counts them all.
	groups   map[string][]*Server
	nmembers int
	// membersGen counts the changes of members (admit, forget): the balancer keeps its ordered
	// copy of them while it holds (host_balance.go).
	membersGen uint64
	// votes is the host's vote journal (host_votes.go), opened by the first member that
	// needs it; its members' stores are their Server.journaled, closed when they leave.
	votes *memberstate.Journal
	// reserve: how many members the vote journal is sized for when it opens (ReserveVotes).
	reserve int
	// layout is what the data dir root holds of the layouts before the vote journal, read
	// once for every member placed by the host (memberDir).
	layout rootLayout

	// settings are the members' shared settings (host_settings.go).
	settings sharedSettings

	bal     *balancer     // nil: NoBalance (host_balance.go)
	drained atomic.Bool   // Drain is in force (host_drain.go)
	drainCh chan struct{} // wakes a Drain
}

type memberKey struct{ group, self string }

// NewHost checks cfg and builds the host's rpc server without opening it. Options: WithLogger
// and WithRegisterer (every member's metrics go on that registry, labelled by group and self;
// default: a registry of the host's own with the Go and process collectors), and the process's
// WithAttacher, which every member added gets (seams.go).
func NewHost(cfg HostConfig, opts ...Option) (*Host, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if cfg.DataDir == "" {
		return nil, errors.New("host: data dir is required (it keeps every member's term and vote across restarts)")
	}
	if err := cfg.checkAuth(); err != nil { // keys.go
		return nil, err
	}
	h := &Host{cfg: cfg, log: o.logger, reg: o.registerer, gatherer: o.gatherer, mux: rpc.NewMux(),
		maint: driver.NewMaintainer(), campaigns: newCampaignGate(cfg), groups: map[string][]*Server{}}
	for _, a := range o.attachers {
		h.memberOpts = append(h.memberOpts, WithAttacher(a))
	}
	if h.reg == nil {
		own := prometheus.NewRegistry()
		own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		h.reg, h.gatherer = own, own
	}
	h.startHostSeries()
	var err error
	if cfg.MaxConns == 0 {
		cfg.MaxConns = defaultHostMaxConns
	}
	if cfg.MaxConnsPerIP == 0 {
		cfg.MaxConnsPerIP = defaultHostMaxConnsPerIP
	}
	if cfg.Workers <= 0 {
		cfg.Workers = defaultHostWorkers
	}
	if h.peerKeys, err = h.initPeerKeys(); err != nil { // keys.go
		return nil, err
	}
	hooks, err := h.initLinks()
	if err != nil {
		return nil, err
	}
	h.rpcSrv, err = rpc.NewServer(h.mux, rpc.ServerOptions{Addr: cfg.Listen, MaxConns: cfg.MaxConns, MaxConnsPerIP: cfg.MaxConnsPerIP, Workers: cfg.Workers,
		MaxInflightPerConn: hostMaxInflightPerConn,
		Auth:               rpc.Auth{Keys: cfg.Keys, Insecure: cfg.Insecure, PeerKeys: h.peerKeys}, Logger: o.logger.Named("rpc"), Hooks: h.withOnlyMember(hooks), OnPeerHello: h.peerHello})
	if err != nil {
		return nil, err
	}
	h.initBalance() // host_balance.go
	if h.live != nil {
		h.live.wake = h.maint.WakeLater // never waits for a member's lock; after the passes that are due
	}
	return h, nil
}

// Start opens the rpc listener and starts the host's StateMaintainer. Members are driven and
// served once they start; a member started before the host has its passes once the host
// starts.
func (h *Host) Start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state {
	case 1:
		return ErrAlreadyStarted
	case 2:
		return fmt.Errorf("%w: host Start after Stop", ErrStopped)
	}
	if err := h.rpcSrv.Start(); err != nil {
		return fmt.Errorf("rpc listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stopRun, h.runDone = cancel, make(chan struct{})
	go func() {
		defer close(h.runDone)
		h.maint.Run(ctx)
	}()
	if h.live != nil {
		h.live.start(ctx)
	}
	h.bal.start(h)
	h.state = 1
	h.log.Info("host started", zap.String("rpc", h.rpcSrv.Addr()))
	return nil
}

// Addr is the rpc listener's bound address.
func (h *Host) Addr() string { return h.rpcSrv.Addr() }

// Gatherer serves the metrics of every member of the host (nil if WithRegisterer was given
// a registerer that is no gatherer).
func (h *Host) Gatherer() prometheus.Gatherer { return h.gatherer }

// AddGroup builds member cfg.SelfID of group cfg.Group on this host, not yet started: the
// broker reports its ledger if needed and calls Start, as with New. cfg takes the host's key
// set and data dir when it leaves Keys, Insecure and DataDir empty; its own Listen is refused
// (it belongs to the process). Options are New's (WithListener,
// WithStore...); the logger and registry are the host's unless given. Several members of one
// group may be on one host, with the same peers: a member whose peers differ from those of a
// member of its group already here is refused (samePeers), as a config file's entries are.
func (h *Host) AddGroup(cfg Config, opts ...Option) (*Server, error) {
	// The process's seams (seams.go), then the caller's options, then the host's: applied once,
	// in the order New would apply them as a list, into the one value the member is made with
	// (a host's members are added by the thousand, issue 29).
	var o options
	WithLogger(h.log)(&o)
	WithRegisterer(h.reg)(&o)
	for _, f := range h.memberOpts {
		f(&o)
	}
	for _, f := range opts {
		f(&o)
	}
	cfg, err := h.memberAuth(cfg)
	if err != nil {
		return nil, err
	}
	key := memberKey{cfg.Group, cfg.SelfID}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == 2 {
		return nil, fmt.Errorf("%w: AddGroup after the host stopped", ErrStopped)
	}
	if h.memberLocked(cfg.Group, cfg.SelfID) != nil {
		return nil, fmt.Errorf("host: member %s of group %s is already on this host", cfg.SelfID, cfg.Group)
	}
	if err := h.samePeers(cfg); err != nil {
		return nil, err
	}
	journaled, err := h.memberStore(&cfg, o.store)
	if err != nil {
		return nil, err
	}
	if journaled != nil {
		o.store = journaled // WithStore
	}
	o.host = h
	s, err := newMember(cfg, withNopLogger(o))
	if err != nil {
		if journaled != nil {
			journaled.Close()
		}
		return nil, err
	}
	h.admit(key, s, journaled)
	return s, nil
}

// samePeers refuses a member whose peers differ from those of a member of its group already on
// this host, as a config file's entries of one group must agree (hostMemberSet.add): members
// of one group that disagree on who its members are would count different quorums. The one
// here is compared as it was given and as it is now (its configuration after a membership
// change), the new one as given, as sets of members at their addresses: either match admits
// it. As given, so that a host restarted after a membership change re-adds its config file's
// entries (New then takes each member's durable configuration over them, 13.6); as it is now,
// so that a member added after a change may name the new configuration. A joining member
// (Config.Join), on either side, is not compared: its peers are a way into the group, not its
// configuration. A peers string New would refuse is left to New's message.
// Called with h.mu held.
func (h *Host) samePeers(cfg Config) error {
	g := h.groups[cfg.Group]
	if len(g) == 0 || cfg.Join || g[0].cfg.Join {
		return nil
	}
	other := g[0]
	peers, err := memberstate.ParsePeers(cfg.Peers)
	if err != nil {
		return nil
	}
	given, _ := memberstate.ParsePeers(other.cfg.Peers)
	if samePeerSet(peers, given) {
		return nil // as the config file lists the group: a restart re-adds its entries so
	}
	have := other.currentPeers()
	if len(have) > 0 && samePeerSet(peers, have) {
		return nil // the group's configuration now, after a membership change
	}
	return fmt.Errorf("host: member %s of group %s: peers %q differ from %q (given) and %q (now) of member %s of that group already on this host",
		cfg.SelfID, cfg.Group, memberstate.FormatPeers(peers), memberstate.FormatPeers(given), memberstate.FormatPeers(have), other.cfg.SelfID)
}

// samePeerSet reports whether a and b name the same members at the same addresses, in any order.
func samePeerSet(a, b []memberstate.Peer) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[memberstate.Peer]bool, len(a))
	for _, p := range a {
		in[p] = true
	}
	for _, p := range b {
		if !in[p] {
			return false
		}
	}
	return true
}

// memberAuth gives cfg the host's keys when it sets none, and refuses a Listen of its own or
// keys that differ from the host's: a host has one rpc port and one way to authenticate.
func (h *Host) memberAuth(cfg Config) (Config, error) {
	if cfg.Listen != "" {
		return cfg, fmt.Errorf("host: member %s of group %s sets Listen; a hosted member is reached at the host's address", cfg.SelfID, cfg.Group)
	}
	switch {
	case cfg.Keys.Len() == 0 && !cfg.Insecure && cfg.MemberKey.IsZero() && cfg.Trust == nil:
		cfg.Keys, cfg.Insecure = h.cfg.Keys, h.cfg.Insecure
		cfg.MemberKey, cfg.Trust = h.cfg.MemberKey, h.cfg.Trust
	case (!cfg.MemberKey.IsZero() || cfg.Trust != nil) && (cfg.MemberKey != h.cfg.MemberKey || cfg.Trust != h.cfg.Trust):
		return cfg, errors.New("host: every group on a host uses the host's member key and trust list; leave MemberKey and Trust empty")
	case !cfg.MemberKey.IsZero(): // the host's own
	case cfg.Insecure != h.cfg.Insecure || !cfg.Keys.Equal(h.cfg.Keys):
		return cfg, errors.New("host: every group on a host uses the host's key set; leave Keys and Insecure empty")
	}
	return cfg, nil
}

// memberStore places the vote of a member given neither a data dir nor a store: a vote file
// in its member dir (cfg.DataDir is set), or the host's vote journal, returned for New to
// use. Called with h.mu held.
func (h *Host) memberStore(cfg *Config, store memberstate.Store) (*memberstate.JournalStore, error) {
	if cfg.DataDir != "" || store != nil {
		h.layout.read = false // its files may be in the root's layouts: read them again
		return nil, nil
	}
	dir, err := h.memberDir(cfg.Group, cfg.SelfID)
	if err != nil {
		return nil, err
	}
	if dir == h.cfg.DataDir || h.cfg.VoteFiles {
		h.layout.read = false // it writes a vote.state of its own
		cfg.DataDir = dir
		return nil, nil
	}
	return h.journalStore(cfg.Group, cfg.SelfID, dir, h.layout.groups)
}

// admit puts a member New built on the host: its journal store, timed as New times a vote
// file, and a drained host's withdrawal. Called with h.mu held.
func (h *Host) admit(key memberKey, s *Server, journaled *memberstate.JournalStore) {
	if journaled != nil {
		s.journaled = journaled
		if s.metrics.ObservesVoteStore() { // a host-only member's records no duration: no clock read per Save
			journaled.SetObserver(s.metrics.VoteStoreOp) // as New does for a vote file
		}
	}
	if h.drained.Load() {
		s.elector.WithdrawCandidacy("host drained")
	}
	h.groups[key.group] = append(h.groups[key.group], s)
	h.nmembers++
	h.membersGen++
}

// memberLocked is member self of group on this host, or nil. Called with h.mu held.
func (h *Host) memberLocked(group, self string) *Server {
	for _, s := range h.groups[group] {
		if s.cfg.SelfID == self {
			return s
		}
	}
	return nil
}

// memberDir is where member self of group keeps its vote file: the root itself if it is a
// single member's data dir (today's layout) whose vote.state names that member, else
// groups/<group>/<self>/ below it. A root vote.state that names no member (a version 1
// record) is refused rather than guessed at.
func (h *Host) memberDir(group, self string) (string, error) {
	if err := h.readLayout(); err != nil {
		return "", err
	}
	l := &h.layout
	if l.known && l.owner == (memberstate.Owner{Group: group, SelfID: self}) {
		return h.cfg.DataDir, nil
	}
	if !l.known && l.rootState {
		return "", fmt.Errorf("host: data dir %s holds a vote.state that names no member; start that member once with server.New to record its owner", h.cfg.DataDir)
	}
	return filepath.Join(h.cfg.DataDir, "groups", pathSegment(group), pathSegment(self)), nil
}

// rootLayout is what a host's data dir root holds of the layouts before the vote journal: a
// vote.state of its own (a single member's data dir, and whose), and a groups/ dir of
// members' own dirs (vote files, or the version before the journal). A cold start of 10,000
// members probed both for each (20,000 failed opens and 10,000 failed stats a host, issue
// 29); they are read once, and again after a member the host did not place (a data dir or
// store of the caller's, or a vote file of its own), whose files may be in those layouts.
// Nothing else in the process writes them: a member the host places keeps its state in the
// vote journal, whose dir is locked. Guarded by Host.mu.
type rootLayout struct {
	read      bool
	owner     memberstate.Owner
	known     bool // the root's vote.state names owner
	rootState bool // the root holds a vote.state
	groups    bool // the root holds groups/ (or it could not be told): look for a member's own vote.state there
}

// readLayout reads the root's layouts unless they were read and still hold. Called with
// h.mu held.
func (h *Host) readLayout() error {
	if h.layout.read {
		return nil
	}
	owner, known, err := memberstate.ReadOwner(h.cfg.DataDir)
	if err != nil {
		return err
	}
	l := rootLayout{read: true, owner: owner, known: known, rootState: known, groups: true}
	if !known {
		_, err := os.Stat(filepath.Join(h.cfg.DataDir, memberstate.StateFileName))
		l.rootState = err == nil
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DataDir, "groups")); errors.Is(err, os.ErrNotExist) {
		l.groups = false
	}
	h.layout = l
	return nil
}

// pathSegment makes a group name or member id one directory name: path-escaped, and never
// "." or "..".
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// RemoveGroup stops member self of group as Server.Stop does (a leader hands over first,
// bounded by ctx) and removes it from the host: its requests are answered UNKNOWN_MEMBER
// from then on, and its data dir is released.
func (h *Host) RemoveGroup(ctx context.Context, group, self string) error {
	h.mu.Lock()
	s := h.memberLocked(group, self)
	h.mu.Unlock()
	if s == nil {
		return fmt.Errorf("host: no member %s of group %s on this host", self, group)
	}
	return s.Stop(ctx) // forgets it (Server.stop)
}

// Member returns the hosted member self of group, or nil.
func (h *Host) Member(group, self string) *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memberLocked(group, self)
}

// Members returns the hosted members, ordered by group then id.
func (h *Host) Members() []*Server {
	h.mu.Lock()
	out := make([]*Server, 0, h.nmembers)
	for _, g := range h.groups {
		out = append(out, g...)
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b *Server) int {
		if a.cfg.Group != b.cfg.Group {
			if a.cfg.Group < b.cfg.Group {
				return -1
			}
			return 1
		}
		if a.cfg.SelfID < b.cfg.SelfID {
			return -1
		}
		if a.cfg.SelfID > b.cfg.SelfID {
			return 1
		}
		return 0
	})
	return out
}

// Stop stops every member (each leader hands over first, all at once, bounded by ctx), then
// the rpc listener. Members cannot be added afterwards.
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	started := h.state == 1
	h.state = 2
	h.mu.Unlock()
	h.bal.stop() // no transfer of its own races the members' hand-overs
	members := h.Members()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, s := range members {
		wg.Go(func() { errs[i] = s.Stop(ctx) })
	}
	wg.Wait()
	if h.links != nil {
		h.links.closeAll() // every member left them; nothing is left but for a failed AddGroup
	}
	if started {
		h.stopRun()
		<-h.runDone
		if h.live != nil {
			h.live.wait()
		}
		if err := h.rpcSrv.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rpc server: %w", err))
		}
	}
	if err := h.closeVotes(); err != nil {
		errs = append(errs, err)
	}
	if h.memberKinds != nil {
		h.memberKinds.Unregister()
	}
	if h.hostSeries != nil {
		h.hostSeries.Unregister()
	}
	return errors.Join(errs...)
}

// forget removes a stopped member from the host's table.
func (h *Host) forget(s *Server) {
	h.bal.forgetRole(s) // its passes have stopped: no role event of it follows
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.groups[s.cfg.Group]; slices.Contains(g, s) {
		h.forgetLocked(s, g)
		h.nmembers--
		h.membersGen++
		if s.journaled != nil {
			s.journaled.Close()
			s.journaled = nil
		}
	}
}

// forgetLocked removes s from its group's members g. When s was the group's first, the one
// a new member is compared with, the first becomes another member of the group on this host
// found among s's peers (they agree, samePeers), in their order. Called with h.mu held.
func (h *Host) forgetLocked(s *Server, g []*Server) {
	first := g[0] == s
	g = slices.DeleteFunc(g, func(x *Server) bool { return x == s })
	if len(g) == 0 {
		delete(h.groups, s.cfg.Group)
		return
	}
	if first {
		for _, p := range s.currentPeers() {
			if i := slices.IndexFunc(g, func(x *Server) bool { return x.cfg.SelfID == p.ID }); i >= 0 {
				g[0], g[i] = g[i], g[0]
				break
			}
		}
	}
	h.groups[s.cfg.Group] = g
}

// hostedHandler is a hosted member's rpc handler: its METADATA hello, which the host's
// listener cannot map to a member's client, lets this member's client stop backing off from
// the sender (what ServerOptions.OnPeerHello does for a member with a port of its own).
type hostedHandler struct {
	metadataHandler
}

func (h hostedHandler) HandleMetadata(req *protocol.MetadataRequest) *protocol.MetadataResponse {
	if req.LocalID != "" {
		h.s.client.Kick(req.LocalID)
	}
	return h.metadataHandler.HandleMetadata(req)
}
