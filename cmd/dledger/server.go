package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/cmd/internal/child"
	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
)

// msDuration is a duration flag that also takes DLedger's plain milliseconds ("2000").
type msDuration struct {
	d   *time.Duration
	set bool
}

// String is "" until the flag is set: the real default comes from --profile, and flag's help
// would otherwise print "(default 0s)". The help text names the profiles' values instead.
func (m *msDuration) String() string {
	if m.d == nil || !m.set {
		return ""
	}
	return m.d.String()
}

func (m *msDuration) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*m.d = time.Duration(n) * time.Millisecond
	} else if d, err := time.ParseDuration(s); err == nil {
		*m.d = d
	} else {
		return fmt.Errorf("%q is neither milliseconds (2000) nor a duration (2s, 150ms)", s)
	}
	m.set = true
	return nil
}

// timingFlags are the election settings, named after DLedger's. They are applied over the
// chosen profile, so only the flags given change anything.
type timingFlags struct {
	profile    string
	preferred  string
	leak       int
	leakSet    bool
	maxWait    int64
	maxWaitSet bool
	durations  map[string]*msDuration
	cfg        dledger.Config
}

func addTimingFlags(fs *flag.FlagSet) *timingFlags {
	t := &timingFlags{durations: map[string]*msDuration{}}
	lan, _ := dledger.Profile(dledger.ProfileLAN)
	dl, _ := dledger.Profile(dledger.ProfileDLedger)
	fast, _ := dledger.Profile(dledger.ProfileFast)
	// These flags only override the profile, so their help shows each profile's value.
	fromProfile := func(a, b, c any) string {
		return fmt.Sprintf(" (default: from --profile; %s %v, %s %v, %s %v)",
			dledger.ProfileLAN, a, dledger.ProfileDLedger, b, dledger.ProfileFast, c)
	}
	fs.StringVar(&t.profile, "profile", dledger.ProfileLAN, "timing profile: lan (our LAN defaults), dledger (Java DLedger's defaults) "+
		"or fast (lan with a 75 ms heartbeat: a silent leader replaced in about 150 ms, for 2-2.5 times the idle CPU)")
	fs.StringVar(&t.preferred, "preferred-leader-ids", "", "preferred leaders, ';'-separated (preferredLeaderIds)")
	fs.Func("max-heartbeat-leak", "heartbeats a follower may miss before it campaigns (maxHeartBeatLeak)"+
		fromProfile(lan.MaxHeartBeatLeak, dl.MaxHeartBeatLeak, fast.MaxHeartBeatLeak), func(s string) error {
		n, err := strconv.Atoi(s)
		t.leak, t.leakSet = n, true
		return err
	})
	fs.Func("max-leadership-transfer-wait-index", "a transferee's lag (entries) must be below this (maxLeadershipTransferWaitIndex)"+
		fromProfile(lan.MaxLeadershipTransferWaitIndex, dl.MaxLeadershipTransferWaitIndex, fast.MaxLeadershipTransferWaitIndex), func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		t.maxWait, t.maxWaitSet = n, true
		return err
	})
	for _, d := range []struct {
		name, help string
		get        func(dledger.Config) time.Duration
	}{
		{"heartbeat-interval", "leader heartbeat period, ms or duration (heartBeatTimeIntervalMs)",
			func(c dledger.Config) time.Duration { return c.HeartBeatInterval }},
		{"min-vote-interval", "lower bound of the random re-vote delay (minVoteIntervalMs)",
			func(c dledger.Config) time.Duration { return c.MinVoteInterval }},
		{"max-vote-interval", "upper bound of the random re-vote delay (maxVoteIntervalMs)",
			func(c dledger.Config) time.Duration { return c.MaxVoteInterval }},
		{"vote-round-base", "a vote round waits at most this + rand(max-vote-interval)",
			func(c dledger.Config) time.Duration { return c.VoteRoundBase }},
		{"min-take-leadership-vote-interval", "re-vote delay lower bound while taking leadership",
			func(c dledger.Config) time.Duration { return c.MinTakeLeadershipVoteInterval }},
		{"max-take-leadership-vote-interval", "re-vote delay upper bound while taking leadership",
			func(c dledger.Config) time.Duration { return c.MaxTakeLeadershipVoteInterval }},
		{"leadership-transfer-wait-timeout", "how long a transferee waits to catch up",
			func(c dledger.Config) time.Duration { return c.LeadershipTransferWaitTimeout }},
	} {
		m := &msDuration{d: new(time.Duration)}
		t.durations[d.name] = m
		fs.Var(m, d.name, d.help+fromProfile(d.get(lan), d.get(dl), d.get(fast)))
	}
	return t
}

// resolve builds the config: profile, then the flags that were given, then validation.
func (t *timingFlags) resolve() (dledger.Config, error) {
	cfg, err := dledger.Profile(t.profile)
	if err != nil {
		return cfg, err
	}
	targets := map[string]*time.Duration{
		"heartbeat-interval": &cfg.HeartBeatInterval, "min-vote-interval": &cfg.MinVoteInterval,
		"max-vote-interval": &cfg.MaxVoteInterval, "vote-round-base": &cfg.VoteRoundBase,
		"min-take-leadership-vote-interval": &cfg.MinTakeLeadershipVoteInterval,
		"max-take-leadership-vote-interval": &cfg.MaxTakeLeadershipVoteInterval,
		"leadership-transfer-wait-timeout":  &cfg.LeadershipTransferWaitTimeout,
	}
	for name, m := range t.durations {
		if m.set {
			*targets[name] = *m.d
		}
	}
	if t.leakSet {
		cfg.MaxHeartBeatLeak = t.leak
	}
	if t.maxWaitSet {
		cfg.MaxLeadershipTransferWaitIndex = t.maxWait
	}
	if t.preferred != "" {
		for _, id := range strings.Split(strings.TrimSuffix(t.preferred, ";"), ";") {
			if err := memberstate.ValidateID(strings.TrimSpace(id)); err != nil {
				return cfg, fmt.Errorf("--preferred-leader-ids: %w", err)
			}
			cfg.PreferredLeaderIDs = append(cfg.PreferredLeaderIDs, strings.TrimSpace(id))
		}
	}
	return cfg, cfg.Validate()
}

// newLogger builds a logger writing to os.Stderr (bench validates its flags with it).
func newLogger(level, format string) (*zap.Logger, error) {
	return newLoggerTo(level, format, os.Stderr)
}

// newLoggerTo builds the logger, writing to w (the command's stderr, so tests see every line a
// failing command prints).
func newLoggerTo(level, format string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var zc zap.Config
	switch format {
	case "json":
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.EncodeTime = encodeLogTime
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("--log-format %q: want json or console", format)
	}
	var enc zapcore.Encoder = zapcore.NewJSONEncoder(zc.EncoderConfig)
	if format == "console" {
		enc = zapcore.NewConsoleEncoder(zc.EncoderConfig)
	}
	ws := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(enc, ws, lvl)
	if zc.Sampling != nil { // as zap's production config: at most 100 equal lines a second, then 1 in 100
		core = keepEvents(core, zapcore.NewSamplerWithOptions(core, time.Second, zc.Sampling.Initial, zc.Sampling.Thereafter))
	}
	opts := []zap.Option{zap.AddCaller(), zap.ErrorOutput(ws)}
	if zc.Development {
		opts = append(opts, zap.Development())
	}
	if !zc.DisableStacktrace {
		opts = append(opts, zap.AddStacktrace(zapcore.ErrorLevel))
	}
	return zap.New(core, opts...), nil
}

// encodeLogTime writes "ts" in JSON logs as child.LogTimeLayout: RFC 3339 in UTC with a fixed
// six-digit fraction ("2025-01-02T15:04:05.123456Z"), which log shippers parse as it is, people
// read, and which sorts as text; microseconds keep the precision of zap's default epoch-seconds
// float.
func encodeLogTime(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format(child.LogTimeLayout))
}

// defaultHTTPAddr puts the admin API on loopback at the rpc port + 1000 (20911 -> 21911). It
// fails when that is past 65535; peers and self must already be valid.
func defaultHTTPAddr(peers, self string) (string, error) {
	ps, err := memberstate.ParsePeers(peers)
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if p.ID == self {
			_, port, _ := net.SplitHostPort(p.Addr)
			n, err := strconv.Atoi(port)
			if err != nil {
				return "", fmt.Errorf("rpc port %q of %s is not a number, so the admin API has no default address: set --http ADDR (or --http off)", port, self)
			}
			if n+1000 > 65535 {
				return "", fmt.Errorf("rpc port %d + 1000 is past 65535, so the admin API has no default address: set --http ADDR (or --http off)", n)
			}
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(n+1000)), nil
		}
	}
	return "", fmt.Errorf("self id %q is not in the peers list", self)
}

// stopOnSignal waits for SIGTERM/SIGINT on sig, then runs stop. A stop can take seconds (a
// leader hands over first), so a second signal meanwhile abandons it: the command returns 130
// at once, with a line saying so, and main exits without waiting for the hand-over.
func stopOnSignal(sig <-chan os.Signal, log *zap.Logger, stderr io.Writer, cmd string, stop func() error) int {
	got := <-sig
	log.Info("stopping (a second signal exits at once)", zap.String("signal", got.String()))
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(stderr, "dledger %s: stop: %v\n", cmd, err)
			return 1
		}
		return 0
	case again := <-sig:
		fmt.Fprintf(stderr, "dledger %s: second signal (%v): hand-over abandoned, exiting now\n", cmd, again)
		return 130
	}
}

// parseFlags parses args; on error it prints one line and returns the exit code to use.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return 0, false
		}
		fmt.Fprintf(stderr, "dledger %s: %v (see 'dledger %s -h')\n", fs.Name(), err, fs.Name())
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dledger %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// serverSetup is `dledger server` resolved from flags, environment and config file, and checked
// without touching the disk (beyond reading the key and token files) or the network.
type serverSetup struct {
	// reloaders re-read files on SIGHUP (reload.go); this command's: the admin TLS certificate.
	reloaders []reloader
	// cfg is the one member the flags name, or (with configs:) what every member shares: the
	// timings, ledger mode, keys and data dir root, without group, id and peers.
	cfg server.Config
	// members are the host's members from the --config file's configs: list; nil: cfg is the
	// one member.
	members  []server.HostMember
	host     server.HostConfig
	daemon   daemon.Config  // the admin API, metrics listener and hooks
	election dledger.Config // cfg.Election with the profile filled in
	// metricsPerGroup is --metrics-per-group: auto, on or off (perGroupMetrics).
	metricsPerGroup string
	log             *zap.Logger
	validate        bool
	warnings        []string       // unknown DLEDGER_ variables
	origins         settingOrigins // where each setting came from

	// memberKeyFile and trustFile are --member-key-file and --trust-file (member keys),
	// re-read on SIGHUP.
	memberKeyFile, trustFile string
}

// serverFlags are `dledger server`'s flags: every setting, whatever layer it comes from.
type serverFlags struct {
	tls                                                 serverTLSFlags // server_tls.go
	validate, insecure                                  *bool
	group, id, peers, dataDir, keyFile, httpAddr        *string
	tokenFile, metricsAddr, ledger, logLevel, logFormat *string
	timing                                              *timingFlags
	onRoleChange, onStop                                *string
	hookTimeout                                         *time.Duration
	idFromPod, listen, adminAdvertise                   *string
	metricsPerGroup                                     *string
	memberKeyFile, trustFile                            *string
	membership                                          *membershipFlags // server_members.go
}

func newServerFlags() (*flag.FlagSet, *serverFlags) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	f := &serverFlags{}
	fs.String("config", "", "YAML file of settings: any flag's name (data-dir or dataDir) or DLedger's "+
		"(selfId, peers, heartBeatTimeIntervalMs, ...); flags and DLEDGER_* variables override it")
	f.validate = fs.Bool("validate", false, "check the settings, key and token files and data dir, create nothing, "+
		"and exit: 0 if the server would start, 2 with the error if not")
	f.group = fs.String("group", "default", "replica group name")
	f.id = fs.String("id", "", "this member's id, one of --peers (required, or --id-from-pod-name)")
	f.idFromPod = fs.String("id-from-pod-name", "", "take the member id from a StatefulSet pod name <statefulset>-<ordinal>: "+
		"dledger-2 is member n2 (ids cannot contain '-'); give the pod's metadata.name from the downward API")
	f.listen = fs.String("listen", "", "address the rpc server binds, e.g. 0.0.0.0:20911 (default: this member's own "+
		"address in --peers, which stays the address the others dial)")
	f.adminAdvertise = fs.String("admin-advertise", "", "admin API address to tell the other members when --http binds one "+
		"they cannot use as it is (0.0.0.0:21911 in a pod: advertise dledger-0.dledger.NS.svc.cluster.local:21911)")
	f.peers = fs.String("peers", "", `members as "n0-host:port;n1-host:port;n2-host:port" (required)`)
	f.dataDir = fs.String("data-dir", "", "directory for the durable term and vote (required)")
	f.keyFile = fs.String("key-file", "", "the group key file (mode 600; 'dledger keygen FILE' writes one): every rpc "+
		"connection between members is authenticated and encrypted with it (required unless --insecure-no-peer-auth)")
	f.memberKeyFile = fs.String("member-key-file", "", "this member's private key (mode 600; 'dledger keygen --member FILE' "+
		"writes one), instead of --key-file: each member proves its id with its own key (with --trust-file; re-read on SIGHUP)")
	f.trustFile = fs.String("trust-file", "", "the group's trust list, one line per member: ID PUBLIC-KEY [NEXT-PUBLIC-KEY] "+
		"(with --member-key-file; re-read on SIGHUP, and connections on a key it drops are closed)")
	f.insecure = fs.Bool("insecure-no-peer-auth", false, "run WITHOUT peer authentication: any host that can reach "+
		"the rpc port can depose the leader or stall the group")
	f.httpAddr = fs.String("http", "", `admin API address (default 127.0.0.1:<rpc port + 1000>; "off" disables); `+
		`an address other hosts can reach needs --admin-token-file (or --client-cert-auth) and --cert-file (or --insecure-network-trusted)`)
	f.tokenFile = fs.String("admin-token-file", "", "file holding the bearer token that PUT /v1/ledger and POST /v1/transfer must present (mode 600)")
	f.tls = addServerTLSFlags(fs)
	f.metricsAddr = fs.String("metrics", "", "read-only listener for /metrics, the health routes, /v1/status, /v1/watch and /v1/members "+
		"(default: none); an address other hosts can reach needs --cert-file (or --insecure-network-trusted)")
	f.metricsPerGroup = fs.String("metrics-per-group", "auto", "export each member's own series (labelled group and self_id): "+
		"on, off, or auto (on up to 100 members, off beyond; the host-wide dledger_host_* series are always there)")
	f.ledger = fs.String("ledger", "none", "where the ledger end comes from: none (no storage; always empty) or sidecar "+
		"(an application reports it with PUT /v1/ledger; until then, after every start, the member abstains)")
	f.logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	f.logFormat = fs.String("log-format", "json", "json or console")
	f.timing = addTimingFlags(fs)
	f.membership = addMembershipFlags(fs)
	f.onRoleChange = fs.String("on-role-change", "", "command run with /bin/sh -c on every role change, with DLEDGER_ROLE, "+
		"DLEDGER_TERM, DLEDGER_LEADER, DLEDGER_SEQ, DLEDGER_PREVIOUS_ROLE, DLEDGER_GROUP and DLEDGER_ID in its environment; "+
		"in order, one at a time: a newer role change kills a run still going")
	f.onStop = fs.String("on-stop", "", "command run with /bin/sh -c once when the server stops (after --on-role-change's run for the final role UNKNOWN)")
	f.hookTimeout = fs.Duration("hook-timeout", daemon.DefaultHookTimeout, "a hook still running after this is killed (SIGTERM to its process group, then SIGKILL)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dledger server --id n0 --peers \"n0-127.0.0.1:20911;n1-127.0.0.1:20912;n2-127.0.0.1:20913\" --data-dir DIR --key-file FILE [flags]\n"+
			"       dledger server --config FILE [--validate] [flags]\n\n"+
			"A --config file with DLedger's proxy list (configs: [{group, selfId, peers, preferredLeaderIds}]) makes this\n"+
			"process a host of many group members on one rpc port (--listen): docs/operations.md, \"Many groups in one process\".\n"+
			"Every flag but --validate can also be set by the environment variable DLEDGER_<NAME> (--data-dir: DLEDGER_DATA_DIR)\n"+
			"or in the --config file; flags win over the environment, which wins over the file.")
		fs.PrintDefaults()
	}
	return fs, f
}

// resolveServer parses and checks the server's settings. When ok is false the command is over:
// it printed its one line (or the help) to stderr and code is the exit status. Exit status 2
// means the settings are wrong; nothing in here creates anything.
func resolveServer(args, environ []string, stderr io.Writer) (su serverSetup, code int, ok bool) {
	fs, f := newServerFlags()
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return su, code, false
	}
	if err := resolveServerSettings(&su, fs, f, environ, stderr); err != nil {
		fmt.Fprintf(stderr, "dledger server: %v\n", err)
		return su, 2, false
	}
	return su, 0, true
}

// resolveServerSettings is resolveServer once the flags parsed: each step below reports the
// first wrong setting it meets, in the order the operator has always been told them.
func resolveServerSettings(su *serverSetup, fs *flag.FlagSet, f *serverFlags, environ []string, stderr io.Writer) error {
	from, err := resolveServerMembers(su, fs, f, environ)
	if err != nil {
		return err
	}
	if err := resolveServerOptions(su, f, from, stderr); err != nil {
		return err
	}
	if err := resolveServerSecrets(su, f, from); err != nil {
		return err
	}
	return checkServerSetup(su, f, from)
}

// resolveServerMembers applies the environment and the --config file, then settles who this
// process is (a host's configs, or one member's id and peers) and how it authenticates peers.
// The func it returns names a setting as the operator wrote it: --id, DLEDGER_ID or selfId
// (FILE:LINE).
func resolveServerMembers(su *serverSetup, fs *flag.FlagSet, f *serverFlags, environ []string) (func(string) string, error) {
	origins, warnings, configsRoot, err := applyConfigLayers(fs, environ)
	if err != nil {
		return nil, err
	}
	su.validate, su.warnings, su.origins = *f.validate, warnings, origins
	from := origins.of
	if _, ok := origins[configsKey]; ok {
		if err := hostMembers(su, fs, f, origins, configsRoot); err != nil {
			return nil, err
		}
	} else if *f.idFromPod != "" {
		if *f.id != "" {
			return nil, fmt.Errorf("%s and %s exclude each other", from("id"), from("id-from-pod-name"))
		}
		if *f.id, err = idFromPodName(*f.idFromPod); err != nil {
			return nil, fmt.Errorf("%s: %v", from("id-from-pod-name"), err)
		}
	}
	switch {
	case su.members != nil:
	case *f.id == "":
		return nil, errors.New("--id is required (or DLEDGER_ID, or selfId in the --config file; in a StatefulSet, --id-from-pod-name)")
	case *f.peers == "":
		return nil, errors.New("--peers is required (or DLEDGER_PEERS, or peers in the --config file)")
	}
	if *f.dataDir == "" {
		return nil, errors.New("--data-dir is required (it keeps the term and vote across restarts; or DLEDGER_DATA_DIR, or dataDir in the --config file)")
	}
	if err := checkPeerAuthFlags(f, from); err != nil {
		return nil, err
	}
	return from, nil
}

// resolveServerOptions turns the timing, logging, metrics, ledger and daemon flags into the
// member's Config and the daemon's settings; it reads no file.
func resolveServerOptions(su *serverSetup, f *serverFlags, from func(string) string, stderr io.Writer) error {
	var err error
	if su.election, err = f.timing.resolve(); err != nil {
		return err
	}
	if su.log, err = newLoggerTo(*f.logLevel, *f.logFormat, stderr); err != nil {
		return err
	}
	switch su.metricsPerGroup = *f.metricsPerGroup; su.metricsPerGroup {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("%s %q: want auto, on or off", from("metrics-per-group"), su.metricsPerGroup)
	}
	mode, err := server.ParseLedgerMode(*f.ledger)
	if err != nil || mode == server.LedgerStorage { // storage mode needs a broker in the process
		return fmt.Errorf("%s %q: want none or sidecar", from("ledger"), *f.ledger)
	}
	su.cfg = server.Config{Group: *f.group, SelfID: *f.id, Peers: *f.peers, DataDir: *f.dataDir, Ledger: mode,
		Profile: f.timing.profile, Election: su.election, Insecure: *f.insecure, Join: *f.membership.join}
	su.daemon.MetricsAddr = *f.metricsAddr
	su.daemon.OnRoleChange, su.daemon.OnStop, su.daemon.HookTimeout = *f.onRoleChange, *f.onStop, *f.hookTimeout
	su.cfg.Listen, su.daemon.AdminAdvertise = *f.listen, *f.adminAdvertise
	// An admin answer may wait out a member's removal: its hand-over, two transfer bounds.
	su.daemon.WriteTimeout = 2*su.election.TransferBound() + 10*time.Second
	return nil
}

// resolveServerSecrets reads the files with keys and tokens: the peer keys, the admin token
// and the TLS material.
func resolveServerSecrets(su *serverSetup, f *serverFlags, from func(string) string) error {
	if err := loadPeerAuth(su, f, from); err != nil {
		return err
	}
	if *f.tokenFile != "" {
		var err error
		if su.daemon.AdminToken, err = readTokenFile(*f.tokenFile); err != nil {
			return fmt.Errorf("%s: %v", from("admin-token-file"), err)
		}
	}
	return resolveServerTLS(su, f.tls, from)
}

// checkServerSetup validates what the steps before built, settles the HTTP address and
// derives the host's configuration.
func checkServerSetup(su *serverSetup, f *serverFlags, from func(string) string) error {
	if su.members == nil { // configs: entries were checked as they were read (hostMembers)
		if err := su.cfg.Validate(); err != nil {
			return err
		}
	}
	if err := su.daemon.Validate(); err != nil {
		return err
	}
	if err := resolveHTTPAddr(su, *f.httpAddr, from); err != nil {
		return err
	}
	// A host of one member from the flags speaks version 1 on the wire, as a member process
	// always did (PerMemberLinks): its peers may be single-member processes of an older
	// version during a rolling upgrade, which refuse a host link's handshake.
	su.host = server.HostConfig{Listen: su.hostListen(), DataDir: su.cfg.DataDir, Keys: su.cfg.Keys, Insecure: su.cfg.Insecure,
		MemberKey: su.cfg.MemberKey, Trust: su.cfg.Trust, PerMemberLinks: su.members == nil,
		OnPeerHostGone: func(string) { gcBurst() }} // server_gcpace.go: the survivors' elections at the burst's GOGC
	if su.members != nil && !su.cfg.MemberKey.IsZero() { // host links: checked per member as they are added
		if err := server.ValidateHostKeys(su.host); err != nil {
			return err
		}
	}
	return nil
}

// resolveHTTPAddr sets the admin HTTP address from --http: off, the default next to the rpc
// port, or the address given, checked.
func resolveHTTPAddr(su *serverSetup, httpAddr string, from func(string) string) error {
	switch httpAddr {
	case "off":
	case "":
		var err error
		if su.daemon.HTTPAddr, err = defaultHTTPAddrOf(*su); err != nil {
			return err
		}
	default:
		su.daemon.HTTPAddr = httpAddr
		if err := su.daemon.Validate(); err != nil {
			return fmt.Errorf("%s: %v", from("http"), err)
		}
	}
	return nil
}

// checkPeerAuthFlags checks that the flags choose one way to authenticate peers: the group
// key, member keys (both files), or none, said explicitly.
func checkPeerAuthFlags(f *serverFlags, from func(string) string) error {
	switch {
	case *f.keyFile == "" && !*f.insecure && *f.memberKeyFile == "" && *f.trustFile == "":
		return errors.New("--key-file is required: peer authentication needs the group key ('dledger keygen FILE' writes one; " +
			"copy it to every member), or member keys (--member-key-file and --trust-file), or run without it with --insecure-no-peer-auth")
	case *f.keyFile != "" && *f.insecure:
		return fmt.Errorf("%s and %s exclude each other", from("key-file"), from("insecure-no-peer-auth"))
	case (*f.memberKeyFile != "" || *f.trustFile != "") && (*f.keyFile != "" || *f.insecure):
		return errors.New("member keys (--member-key-file, --trust-file) exclude --key-file and --insecure-no-peer-auth")
	case (*f.memberKeyFile == "") != (*f.trustFile == ""):
		return errors.New("--member-key-file and --trust-file go together: this member's key and the group's trust list")
	}
	return nil
}

// loadPeerAuth reads the files checkPeerAuthFlags accepted: the group key, or this member's
// key and the trust list (kept by name too, for the SIGHUP reload).
func loadPeerAuth(su *serverSetup, f *serverFlags, from func(string) string) error {
	var err error
	if *f.keyFile != "" {
		if su.cfg.Keys, err = secure.LoadKeyFile(*f.keyFile); err != nil {
			return fmt.Errorf("%s: %v", from("key-file"), err)
		}
	}
	if *f.memberKeyFile != "" {
		su.memberKeyFile, su.trustFile = *f.memberKeyFile, *f.trustFile
		if su.cfg.MemberKey, err = secure.LoadStaticKeyFile(*f.memberKeyFile); err != nil {
			return fmt.Errorf("%s: %v", from("member-key-file"), err)
		}
		if su.cfg.Trust, err = secure.LoadTrustFile(*f.trustFile); err != nil {
			return fmt.Errorf("%s: %v", from("trust-file"), err)
		}
	}
	return nil
}

// useOneProcessor runs the member on one Go processor (P) unless GOMAXPROCS is set. A
// member's work is a few requests a second, so a second P buys nothing, and it costs: the
// rpc server's event loop waits in epoll_wait holding a P, which keeps Go's sysmon thread
// polling at up to 50 000 wake-ups a second for 10 ms after every frame that arrives. With
// one P sysmon takes the P back at once and sleeps. Measured on an idle 3-member lan group:
// a follower's CPU falls from about 0.85 % to 0.28 % of a core (docs/design.md, "What an idle
// member costs"). It is called one detection window after the member starts serving, so
// start-up (package init, the key, the listeners) and the first election of a group started
// together still have every processor.
func useOneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// quietProcess is what a member process does once it has served a while, to keep its idle
// cost down: one processor (useOneProcessor), and gnet's goroutine pool released, whose clock
// woke the process twice a second for a pool the member never uses (rpc.ReleaseGnetWorkerPool).
func quietProcess() {
	useOneProcessor()
	rpc.ReleaseGnetWorkerPool()
}

// quietOnceServing is set by main for the server command: tests that call runServer in their
// own process keep their processors (and the process-wide pool).
var quietOnceServing bool

func runServer(args []string, stdout, stderr io.Writer) int {
	startEarlyCPU() // server_profile.go: only with DLEDGERPPROF set
	su, code, ok := resolveServer(args, os.Environ(), stderr)
	if !ok {
		return code
	}
	// Exit status 2: the settings are wrong (resolveServer, and --validate's data dir check);
	// 1: they are right but running failed (data dir, corrupt vote.state, port in use, stop).
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "dledger server: "+format+"\n", a...)
		return code
	}
	if su.validate {
		return validateServer(su, stdout, stderr)
	}
	log := su.log
	defer log.Sync()
	hup := catchHangUp() // before the members serve: a SIGHUP must never end the server
	for _, w := range su.warnings {
		log.Warn(w)
	}
	startProfiles(log)       // server_profile.go: only with DLEDGERPPROF set
	startSignalProfiles(log) // server_profile_sig.go: only with DLEDGERCPUSIG set
	var started time.Time
	if quietOnceServing && len(su.members) > 1 { // a host of groups; a member process's heap is a few MiB
		started = gcBurstAtStart() // server_gcpace.go: the members' first elections, from their making
	}
	// Only now is anything created (the data dir): bad settings leave no trace.
	p, err := startHost(su, log)
	if err != nil {
		return fail(1, "%v", err)
	}
	var quiet *time.Timer
	stopReturning := func() {}
	if quietOnceServing {
		stopReturning = startReturningIdleHeap(started, p.host.Campaigning) // server_memory.go
		// One detection window later, not at once: dropping the second processor hands its
		// cached memory back to the heap, a few milliseconds of page faults that a group started
		// together would otherwise spend during its first election (docs/design.md).
		quiet = time.AfterFunc(su.cfg.Election.DetectionWindow(), quietProcess)
	}
	// systemd (Type=notify) considers the unit started once the members serve.
	notifySocket := os.Getenv("NOTIFY_SOCKET")
	status := fmt.Sprintf("STATUS=serving %d group members", len(su.members))
	if su.members == nil {
		status = "STATUS=serving group " + su.cfg.Group + " as " + su.cfg.SelfID
	}
	if err := sdNotify(notifySocket, "READY=1\n"+status); err != nil {
		log.Warn("could not tell the service manager the member is ready", zap.Error(err))
	}
	reloaders := su.reloaders // run in order on SIGHUP (reload.go): the admin TLS certificate first, then the peer keys
	if su.memberKeyFile != "" {
		reloaders = append(reloaders, peerKeysReloader(su.memberKeyFile, su.trustFile, p.host))
	}
	defer reloadOnHangUp(log, hup, reloaders)()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	return stopOnSignal(sig, log, stderr, "server", func() error {
		if quiet != nil {
			quiet.Stop() // not in the middle of stopping (gnet's pool, hooks)
		}
		stopReturning()
		if err := sdNotify(notifySocket, "STOPPING=1"); err != nil {
			log.Warn("could not tell the service manager the member is stopping", zap.Error(err))
		}
		return p.stop()
	})
}

// validateServer is --validate after the settings passed: it checks the data dir without
// creating it and prints what would run.
func validateServer(su serverSetup, stdout, stderr io.Writer) int {
	for _, w := range su.warnings {
		fmt.Fprintf(stderr, "dledger server: warning: %s\n", w)
	}
	exists, err := checkDataDir(su.cfg.DataDir)
	if err != nil {
		fmt.Fprintf(stderr, "dledger server: %s: %v\n", su.origins.of("data-dir"), err)
		return 2
	}
	dir := su.cfg.DataDir + " (exists)"
	if !exists {
		dir = su.cfg.DataDir + " (will be created)"
	}
	auth := "peer authentication on"
	if !su.cfg.MemberKey.IsZero() {
		auth = "peer authentication on (member keys, key " + su.cfg.MemberKey.Public().ID() + ")"
	}
	if su.cfg.Insecure {
		auth = "peer authentication OFF"
	}
	admin, metricsAddr := su.daemon.HTTPAddr, su.daemon.MetricsAddr
	if admin == "" {
		admin = "off"
	}
	if metricsAddr == "" {
		metricsAddr = "off"
	}
	who := fmt.Sprintf("group %s, member %s of %s", su.cfg.Group, su.cfg.SelfID, su.cfg.Peers)
	if su.members != nil {
		groups := map[string]bool{}
		for _, m := range su.members {
			groups[m.Group] = true
		}
		who = fmt.Sprintf("host %s of %d members of %d groups", su.host.Listen, len(su.members), len(groups))
	}
	if su.daemon.TLS != nil {
		leaf := su.daemon.TLS.Leaf()
		tlsNote := fmt.Sprintf(" over HTTPS (certificate %q, expires %s)", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.DateOnly))
		if su.daemon.HTTPAddr != "" {
			admin += tlsNote
		}
		if su.daemon.MetricsAddr != "" {
			metricsAddr += " over HTTPS"
		}
	}
	fmt.Fprintf(stdout, "dledger server: settings valid: %s, profile %s, ledger %s, %s, data dir %s, admin API %s, metrics %s\n",
		who, su.cfg.Profile, su.cfg.Ledger, auth, dir, admin, metricsAddr)
	return 0
}
