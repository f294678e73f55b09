package main

// `dledger server` runs a server.Host: one member from the flags (--group, --id, --peers), as
// before hosts, or every member of the --config file's configs: list (DLedger's proxy format),
// on one rpc port (--listen), one data dir root and one admin API (package server/daemon).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
)

// oneMemberFlags name the one member of a process without configs:.
var oneMemberFlags = []string{"group", "id", "peers", "id-from-pod-name", "preferred-leader-ids"}

// hostMembers reads the --config file's configs: list into su.members and checks it against
// the flags: no flag that names one member, a --listen, and every entry's own address in its
// peers the host's --listen. root is the file's top-level mapping as applyConfigLayers decoded
// it: the file is read once (issue 29: decoding a host's file of 10,000 members took 90 ms).
func hostMembers(su *serverSetup, fs *flag.FlagSet, f *serverFlags, origins settingOrigins, root *yaml.Node) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, name := range oneMemberFlags {
		if set[name] {
			return fmt.Errorf("%s names one member, but %s lists this host's members: give each one's group, selfId, "+
				"peers and preferredLeaderIds in its configs: entry", origins.of(name), origins[configsKey])
		}
	}
	path := fs.Lookup("config").Value.String()
	keys := fileKeys(fs)
	members, err := server.ParseHostMembersNode(root, path, func(k string) bool { _, ok := keys[k]; return ok })
	if err != nil {
		return err
	}
	if *f.listen == "" {
		return fmt.Errorf("--listen is required with %s: the host's rpc address, which every entry's own peers entry names", origins[configsKey])
	}
	listen := *f.listen
	for _, m := range members {
		if err := ownAddrIs(m, listen); err != nil {
			return fmt.Errorf("%s:%d: %w", path, m.Line, err)
		}
	}
	su.members = members
	return nil
}

// ownAddrIs refuses an entry whose own address in its peers is not the host's rpc address:
// the other members would dial a port this host does not serve.
func ownAddrIs(m server.HostMember, listen string) error {
	peers, err := memberstate.ParsePeers(m.Peers)
	if err != nil {
		return err
	}
	for _, p := range peers {
		if p.ID == m.SelfID && p.Addr != listen {
			return fmt.Errorf("member %s of group %s is at %s in its peers, but this host listens on %s (--listen)",
				m.SelfID, m.Group, p.Addr, listen)
		}
	}
	return nil
}

// memberConfigs are the members the host starts with.
func (su serverSetup) memberConfigs() []server.Config {
	if su.members == nil {
		c := su.cfg
		c.Listen = ""             // the host binds it (hostListen)
		return []server.Config{c} // DataDir: the data dir itself, today's layout
	}
	out := make([]server.Config, len(su.members))
	for i, m := range su.members {
		out[i] = su.entryConfig(m)
	}
	return out
}

// entryConfig is the Config of a configs: entry (or of a member added at run time): the
// shared settings with the entry's group, id, peers and preferred leaders. Its data dir is
// the host's choice (groups/<group>/<id>/ below the root, or the root itself if it is that
// member's data dir of a one-member process: server.Host.AddGroup).
func (su serverSetup) entryConfig(m server.HostMember) server.Config {
	base := su.cfg
	base.Listen, base.DataDir, base.Keys, base.Insecure = "", "", server.KeySet{}, false // the host's
	base.MemberKey, base.Trust = server.StaticKey{}, nil                                 // the host's too
	base.Election.PreferredLeaderIDs = nil
	return m.Config(base)
}

// hostListen is the host's rpc address: --listen, else the one member's own peers entry.
func (su serverSetup) hostListen() string {
	if su.cfg.Listen != "" || su.members != nil {
		return su.cfg.Listen
	}
	peers, _ := memberstate.ParsePeers(su.cfg.Peers) // valid: resolveServer checked it
	for _, p := range peers {
		if p.ID == su.cfg.SelfID {
			return p.Addr
		}
	}
	return ""
}

// defaultHTTPAddrOf is the admin API's default address: loopback at the rpc port + 1000.
func defaultHTTPAddrOf(su serverSetup) (string, error) {
	if su.members == nil {
		return defaultHTTPAddr(su.cfg.Peers, su.cfg.SelfID)
	}
	_, port, err := net.SplitHostPort(su.cfg.Listen)
	n, err2 := strconv.Atoi(port)
	if err != nil || err2 != nil || n+1000 > 65535 {
		return "", fmt.Errorf("--listen %s: no default admin address at its port + 1000: set --http ADDR (or --http off)", su.cfg.Listen)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n+1000)), nil
}

// hostProcess is a running `dledger server`: the host, its members and the daemon.
type hostProcess struct {
	host   *server.Host
	daemon *daemon.Daemon
}

// startHost builds the daemon and the host, adds the members, opens the admin listeners (a
// port in use is reported before any member runs), starts the host and every member, and
// serves the admin API. On an error everything built is stopped again.
func startHost(su serverSetup, log *zap.Logger) (*hostProcess, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Without per-group series the members keep none (their hooks' go on a registry nobody
	// serves); the host-wide series (server.Host's, on reg) still count them all.
	var memberOpts []server.Option
	daemonOpts := []daemon.Option{daemon.WithLogger(log), daemon.WithRegisterer(reg)}
	if !su.perGroupMetrics() {
		memberOpts = append(memberOpts, server.WithoutMemberSeries())
		daemonOpts = append(daemonOpts, daemon.WithRegisterer(prometheus.NewRegistry()), daemon.WithGatherer(reg))
	}
	d, err := daemon.New(su.daemon, daemonOpts...)
	if err != nil {
		return nil, err
	}
	h, err := server.NewHost(su.host, server.WithLogger(log), server.WithRegisterer(reg), server.WithAttacher(d.Attacher()))
	if err != nil {
		return nil, err
	}
	p := &hostProcess{host: h, daemon: d}
	fail := func(err error) (*hostProcess, error) {
		ctx, cancel := context.WithTimeout(context.Background(), p.stopTimeout())
		defer cancel()
		h.Stop(ctx)
		d.Stop(ctx)
		return nil, err
	}
	var members []*server.Server
	configs := su.memberConfigs()
	h.ReserveVotes(len(configs)) // the journal's zeros written once, for all of them
	for _, c := range configs {
		s, err := h.AddGroup(c, memberOpts...)
		if err != nil {
			if su.members != nil {
				err = fmt.Errorf("member %s of group %s: %w", c.SelfID, c.Group, err)
			}
			return fail(err)
		}
		members = append(members, s)
	}
	added := su
	added.members = nil // the start's list is not kept for the process's life (a record per member)
	d.SetHost(h, func(m server.HostMember) (server.Config, []server.Option, error) {
		if err := ownAddrIs(m, added.host.Listen); err != nil {
			return server.Config{}, nil, err
		}
		return added.entryConfig(m), memberOpts, nil
	})
	if err := d.Listen(); err != nil {
		return fail(err)
	}
	if err := h.Start(); err != nil {
		return fail(err)
	}
	for _, s := range members {
		if err := s.Start(); err != nil {
			return fail(err)
		}
	}
	d.Serve()
	return p, nil
}

// stopTimeout is a deadline the host's stop can keep: its members stop at once, so the
// longest of their StopTimeouts.
func (p *hostProcess) stopTimeout() time.Duration {
	t := 5 * time.Second
	for _, s := range p.host.Members() {
		t = max(t, s.StopTimeout())
	}
	return t
}

// stop stops every member (leaders hand over first), then the admin listeners.
func (p *hostProcess) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.stopTimeout())
	defer cancel()
	return errors.Join(p.host.Stop(ctx), p.daemon.Stop(ctx))
}

// autoPerGroupMax is the most members --metrics-per-group=auto exports per-member series for:
// about 25 series each (more with peers' round trips), so a few thousand series at most.
const autoPerGroupMax = 100

// perGroupMetrics says whether the members' own series (labelled group and self_id) are
// exported: --metrics-per-group on, off, or auto (on for a host of up to autoPerGroupMax
// members at start, so one member's metrics stay as they always were). A member added at run
// time follows what the start decided.
func (su serverSetup) perGroupMetrics() bool {
	switch su.metricsPerGroup {
	case "on":
		return true
	case "off":
		return false
	}
	return len(su.memberConfigs()) <= autoPerGroupMax
}
