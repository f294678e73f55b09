package main

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

const (
	cfgPeers2 = "n0-127.0.0.1:20911;n1-127.0.0.1:20912"
	cfgPeers3 = "n0-127.0.0.1:20911;n1-127.0.0.1:20912;n2-127.0.0.1:20913"
)

// cfgKeyFile writes a group key file into a new temporary directory.
func cfgKeyFile(t *testing.T) string {
	t.Helper()
	return writeGroupKey(t, t.TempDir())
}

// memberKeyPair is n0's member key file and the trust file of n0 and n1 (cfgPeers2), written
// once per test.
var memberKeyPairs sync.Map // *testing.T -> [2]string

func memberKeyPair(t *testing.T) [2]string {
	t.Helper()
	if p, ok := memberKeyPairs.Load(t); ok {
		return p.([2]string)
	}
	dir := t.TempDir()
	trust, _ := memberKeyFiles(t, dir, 2)
	p := [2]string{filepath.Join(dir, "n0.key"), trust}
	memberKeyPairs.Store(t, p)
	return p
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// resolveOK resolves the server's settings and fails the test on any error.
func resolveOK(t *testing.T, args, environ []string) serverSetup {
	t.Helper()
	var stderr bytes.Buffer
	su, code, ok := resolveServer(args, environ, &stderr)
	if !ok {
		t.Fatalf("server %q with env %q: exit %d: %s", args, environ, code, stderr.String())
	}
	return su
}

// Flags over environment over file over profile: each layer overrides the one below, setting
// by setting, and the others still come from below.
func TestServerSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	key := cfgKeyFile(t)
	base := []string{"--id", "n0", "--peers", cfgPeers2, "--data-dir", filepath.Join(dir, "data"), "--key-file", key}
	file := writeFile(t, dir, "n0.yaml", "group: from-file\nheartBeatTimeIntervalMs: 300\nmaxHeartBeatLeak: 4\nmetrics: 127.0.0.1:30001\n", 0o644)
	dledgerFile := writeFile(t, dir, "dl.yaml", "profile: dledger\nmaxVoteIntervalMs: 1500\n", 0o644)
	fastFile := writeFile(t, dir, "fast.yaml", "profile: fast\n", 0o644)
	for _, c := range []struct {
		name        string
		args, env   []string
		group       string
		heartbeat   time.Duration
		leak        int
		metrics     string
		maxVote     time.Duration
		groupOrigin string
	}{
		{"profile only", nil, nil, "default", 200 * time.Millisecond, 3, "", 300 * time.Millisecond, "--group"},
		{"file over profile", []string{"--config", file}, nil, "from-file", 300 * time.Millisecond, 4, "127.0.0.1:30001", 300 * time.Millisecond,
			"group (" + file + ":1)"},
		{"env over file", []string{"--config", file}, []string{"DLEDGER_GROUP=from-env", "DLEDGER_HEARTBEAT_INTERVAL=400ms"},
			"from-env", 400 * time.Millisecond, 4, "127.0.0.1:30001", 300 * time.Millisecond, "DLEDGER_GROUP"},
		{"flag over env", []string{"--config", file, "--group", "from-flag", "--heartbeat-interval", "500"},
			[]string{"DLEDGER_GROUP=from-env", "DLEDGER_HEARTBEAT_INTERVAL=400ms", "DLEDGER_METRICS=127.0.0.1:30002"},
			"from-flag", 500 * time.Millisecond, 4, "127.0.0.1:30002", 300 * time.Millisecond, "--group"},
		{"file by DLEDGER_CONFIG", nil, []string{"DLEDGER_CONFIG=" + file}, "from-file", 300 * time.Millisecond, 4, "127.0.0.1:30001",
			300 * time.Millisecond, "group (" + file + ":1)"},
		{"--config over DLEDGER_CONFIG", []string{"--config", file}, []string{"DLEDGER_CONFIG=" + dledgerFile}, "from-file",
			300 * time.Millisecond, 4, "127.0.0.1:30001", 300 * time.Millisecond, "group (" + file + ":1)"},
		// The profile named in the file is the base the other layers change.
		{"profile from file", []string{"--config", dledgerFile}, nil, "default", 2 * time.Second, 3, "", 1500 * time.Millisecond, "--group"},
		{"profile from file, timing from env", []string{"--config", dledgerFile}, []string{"DLEDGER_MAX_HEARTBEAT_LEAK=6"},
			"default", 2 * time.Second, 6, "", 1500 * time.Millisecond, "--group"},
		{"profile from env over file", []string{"--config", dledgerFile}, []string{"DLEDGER_PROFILE=lan"},
			"default", 200 * time.Millisecond, 3, "", 1500 * time.Millisecond, "--group"},
		{"profile from flag over env", []string{"--config", dledgerFile, "--profile", "dledger"}, []string{"DLEDGER_PROFILE=lan"},
			"default", 2 * time.Second, 3, "", 1500 * time.Millisecond, "--group"},
		// The fast profile (docs/protocol.md 6.1) in every layer, and a timing over it.
		{"fast profile from flag", []string{"--profile", "fast"}, nil, "default", 75 * time.Millisecond, 8, "", 300 * time.Millisecond, "--group"},
		{"fast profile from env", nil, []string{"DLEDGER_PROFILE=fast"}, "default", 75 * time.Millisecond, 8, "", 300 * time.Millisecond, "--group"},
		{"fast profile from file", []string{"--config", fastFile}, nil, "default", 75 * time.Millisecond, 8, "", 300 * time.Millisecond, "--group"},
		{"fast profile, heartbeat from env", []string{"--config", fastFile}, []string{"DLEDGER_HEARTBEAT_INTERVAL=100"},
			"default", 100 * time.Millisecond, 8, "", 300 * time.Millisecond, "--group"},
		{"lan from flag over fast from file", []string{"--config", fastFile, "--profile", "lan"}, nil,
			"default", 200 * time.Millisecond, 3, "", 300 * time.Millisecond, "--group"},
	} {
		t.Run(c.name, func(t *testing.T) {
			su := resolveOK(t, append(append([]string{}, base...), c.args...), c.env)
			e := su.election
			if su.cfg.Group != c.group || e.HeartBeatInterval != c.heartbeat || e.MaxHeartBeatLeak != c.leak ||
				su.daemon.MetricsAddr != c.metrics || e.MaxVoteInterval != c.maxVote {
				t.Fatalf("group %q, heartbeat %v, leak %d, metrics %q, max vote %v; want %q, %v, %d, %q, %v",
					su.cfg.Group, e.HeartBeatInterval, e.MaxHeartBeatLeak, su.daemon.MetricsAddr, e.MaxVoteInterval,
					c.group, c.heartbeat, c.leak, c.metrics, c.maxVote)
			}
			if got := su.origins.of("group"); got != c.groupOrigin {
				t.Fatalf("group's origin %q, want %q", got, c.groupOrigin)
			}
		})
	}
}

// flagCheck is how a test value of one flag shows in the resolved setup.
type flagCheck struct {
	value string
	ok    func(su serverSetup, stderr *bytes.Buffer) bool
}

// settingCompanions are the flags a setting needs beside it (a certificate's key), given on
// the command line while the setting comes from the layer tested.
func settingCompanions(pair tlstest.Pair, ca *tlstest.CA) map[string][]string {
	return map[string][]string{
		"cert-file":                {"--cert-key-file", pair.Key},
		"cert-key-file":            {"--cert-file", pair.CertFile},
		"trusted-ca-file":          {"--cert-file", pair.CertFile, "--cert-key-file", pair.Key},
		"client-cert-auth":         {"--cert-file", pair.CertFile, "--cert-key-file", pair.Key, "--trusted-ca-file", ca.File},
		"insecure-network-trusted": {"--metrics", "10.0.0.1:30007"},
	}
}

// settingChecks has an entry for every setting flag; TestEveryFlagIsASettingInEveryLayer fails
// when a flag is added without one.
func settingChecks(t *testing.T, tlsCA *tlstest.CA, tlsPair tlstest.Pair) map[string]flagCheck {
	tokenFile := writeFile(t, t.TempDir(), "admin.token", "0123456789abcdef0123\n", 0o600)
	el := func(pick func(su serverSetup) any, want any) func(serverSetup, *bytes.Buffer) bool {
		return func(su serverSetup, _ *bytes.Buffer) bool { return reflect.DeepEqual(pick(su), want) }
	}
	return map[string]flagCheck{
		"group":    {"g1", el(func(su serverSetup) any { return su.cfg.Group }, "g1")},
		"id":       {"n1", el(func(su serverSetup) any { return su.cfg.SelfID }, "n1")},
		"peers":    {cfgPeers3, el(func(su serverSetup) any { return su.cfg.Peers }, cfgPeers3)},
		"data-dir": {"/x/data", el(func(su serverSetup) any { return su.cfg.DataDir }, "/x/data")},
		// The base leaves the key out when key-file is tested: a key means the file was read.
		"key-file":              {cfgKeyFile(t), el(func(su serverSetup) any { return su.cfg.Keys.Len() }, 1)},
		"insecure-no-peer-auth": {"true", el(func(su serverSetup) any { return su.cfg.Insecure }, true)},
		// Member keys come in pairs: the base gives the other file (memberKeyPair).
		"member-key-file":  {memberKeyPair(t)[0], el(func(su serverSetup) any { return su.cfg.MemberKey.IsZero() }, false)},
		"trust-file":       {memberKeyPair(t)[1], el(func(su serverSetup) any { return su.cfg.Trust != nil }, true)},
		"http":             {"127.0.0.1:30003", el(func(su serverSetup) any { return su.daemon.HTTPAddr }, "127.0.0.1:30003")},
		"admin-token-file": {tokenFile, el(func(su serverSetup) any { return su.daemon.AdminToken }, "0123456789abcdef0123")},
		"metrics":          {"127.0.0.1:30004", el(func(su serverSetup) any { return su.daemon.MetricsAddr }, "127.0.0.1:30004")},
		"ledger":           {"sidecar", el(func(su serverSetup) any { return su.cfg.Ledger }, server.LedgerSidecar)},
		"log-level":        {"debug", func(su serverSetup, _ *bytes.Buffer) bool { return su.log.Core().Enabled(zap.DebugLevel) }},
		"join":             {"true", el(func(su serverSetup) any { return su.cfg.Join }, true)},
		"log-format": {"console", func(su serverSetup, stderr *bytes.Buffer) bool {
			stderr.Reset()
			su.log.Info("probe") // the logger writes to the stderr resolveServer was given
			return strings.Contains(stderr.String(), "probe") && !strings.HasPrefix(stderr.String(), "{")
		}},
		"profile":              {"dledger", el(func(su serverSetup) any { return su.election.HeartBeatInterval }, 2*time.Second)},
		"preferred-leader-ids": {"n1;n0", el(func(su serverSetup) any { return su.election.PreferredLeaderIDs }, []string{"n1", "n0"})},
		"max-heartbeat-leak":   {"5", el(func(su serverSetup) any { return su.election.MaxHeartBeatLeak }, 5)},
		"max-leadership-transfer-wait-index": {"77",
			el(func(su serverSetup) any { return su.election.MaxLeadershipTransferWaitIndex }, int64(77))},
		"heartbeat-interval": {"250", el(func(su serverSetup) any { return su.election.HeartBeatInterval }, 250*time.Millisecond)},
		"min-vote-interval":  {"150", el(func(su serverSetup) any { return su.election.MinVoteInterval }, 150*time.Millisecond)},
		"max-vote-interval":  {"350", el(func(su serverSetup) any { return su.election.MaxVoteInterval }, 350*time.Millisecond)},
		"vote-round-base":    {"1s", el(func(su serverSetup) any { return su.election.VoteRoundBase }, time.Second)},
		"min-take-leadership-vote-interval": {"40",
			el(func(su serverSetup) any { return su.election.MinTakeLeadershipVoteInterval }, 40*time.Millisecond)},
		"max-take-leadership-vote-interval": {"90",
			el(func(su serverSetup) any { return su.election.MaxTakeLeadershipVoteInterval }, 90*time.Millisecond)},
		"leadership-transfer-wait-timeout": {"1500",
			el(func(su serverSetup) any { return su.election.LeadershipTransferWaitTimeout }, 1500*time.Millisecond)},
		"on-role-change": {"echo $DLEDGER_ROLE", el(func(su serverSetup) any { return su.daemon.OnRoleChange }, "echo $DLEDGER_ROLE")},
		"on-stop":        {"echo stopped", el(func(su serverSetup) any { return su.daemon.OnStop }, "echo stopped")},
		"hook-timeout":   {"3s", el(func(su serverSetup) any { return su.daemon.HookTimeout }, 3*time.Second)},
		// The base leaves --id out when id-from-pod-name is tested (they exclude each other).
		"id-from-pod-name":  {"dledger-1", el(func(su serverSetup) any { return su.cfg.SelfID }, "n1")},
		"listen":            {"0.0.0.0:30005", el(func(su serverSetup) any { return su.cfg.Listen }, "0.0.0.0:30005")},
		"metrics-per-group": {"off", el(func(su serverSetup) any { return su.metricsPerGroup }, "off")},
		"admin-advertise":   {"n1.example:30006", el(func(su serverSetup) any { return su.daemon.AdminAdvertise }, "n1.example:30006")},
		"cert-file": {tlsPair.CertFile, func(su serverSetup, _ *bytes.Buffer) bool {
			return su.daemon.TLS != nil && su.daemon.TLS.Leaf().Subject.CommonName == "n1"
		}},
		"cert-key-file":            {tlsPair.Key, func(su serverSetup, _ *bytes.Buffer) bool { return su.daemon.TLS != nil }},
		"trusted-ca-file":          {tlsCA.File, func(su serverSetup, _ *bytes.Buffer) bool { return su.daemon.TLS != nil && su.daemon.TLS.HasCA() }},
		"client-cert-auth":         {"true", el(func(su serverSetup) any { return su.daemon.ClientCertAuth }, true)},
		"insecure-network-trusted": {"true", el(func(su serverSetup) any { return su.daemon.InsecureNetworkTrusted }, true)},
	}
}

// Every flag but --config and --validate is a setting: it has a file key under its own name,
// its camelCase name and DLedger's and RocketMQ's names, and a DLEDGER_ variable, and each
// sets the same thing the flag does.
func TestEveryFlagIsASettingInEveryLayer(t *testing.T) {
	tlsCA := tlstest.NewCA(t, "settings")
	tlsPair := tlsCA.Server(t, "n1")
	checks := settingChecks(t, tlsCA, tlsPair)
	companions := settingCompanions(tlsPair, tlsCA)
	fs, _ := newServerFlags()
	keys := fileKeys(fs)
	byFlag := map[string][]string{}
	for k, f := range keys {
		byFlag[f] = append(byFlag[f], k)
	}
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" || f.Name == "validate" {
			if _, ok := byFlag[f.Name]; ok {
				t.Errorf("--%s has a file key", f.Name)
			}
			return
		}
		flags = append(flags, f.Name)
		if _, ok := checks[f.Name]; !ok {
			t.Errorf("--%s has no entry in settingChecks: add one", f.Name)
		}
	})
	// DLedger's and RocketMQ's names, as the brief and docs/protocol.md list them.
	for _, k := range []string{"group", "selfId", "peers", "dataStorePath", "data-dir", "dataDir", "heartBeatTimeIntervalMs",
		"maxHeartBeatLeak", "minVoteIntervalMs", "maxVoteIntervalMs", "preferredLeaderIds", "maxLeadershipTransferWaitIndex",
		"leadershipTransferWaitTimeout", "minTakeLeadershipVoteIntervalMs", "maxTakeLeadershipVoteIntervalMs", "voteRoundBase",
		"dLegerGroup", "dLegerSelfId", "dLegerPeers", "preferredLeaderId", "profile", "ledger", "http", "metrics", "keyFile",
		"adminTokenFile", "insecureNoPeerAuth", "logLevel", "logFormat"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("file key %s is not accepted", k)
		}
	}
	required := map[string]string{"id": "n0", "peers": cfgPeers2, "data-dir": filepath.Join(t.TempDir(), "data"), "key-file": cfgKeyFile(t)}
	for _, name := range flags {
		c := checks[name]
		// The other required settings come as flags; the tested one must come from its layer.
		base := append([]string{}, companions[name]...)
		for _, r := range []string{"id", "peers", "data-dir", "key-file"} {
			if r != name && !(r == "key-file" && name == "insecure-no-peer-auth") && !(r == "id" && name == "id-from-pod-name") &&
				!(r == "key-file" && (name == "member-key-file" || name == "trust-file")) {
				base = append(base, "--"+r, required[r])
			}
		}
		switch name { // member keys: the other file of the pair as a flag
		case "member-key-file":
			base = append(base, "--trust-file", memberKeyPair(t)[1])
		case "trust-file":
			base = append(base, "--member-key-file", memberKeyPair(t)[0])
		}
		layers := map[string]func() ([]string, []string){
			"flag": func() ([]string, []string) { return []string{"--" + name + "=" + c.value}, nil },
			"env":  func() ([]string, []string) { return nil, []string{envName(name) + "=" + c.value} },
		}
		sort.Strings(byFlag[name])
		for _, k := range byFlag[name] {
			layers["file key "+k] = func() ([]string, []string) {
				file := writeFile(t, t.TempDir(), "c.yaml", k+": "+c.value+"\n", 0o644)
				return []string{"--config", file}, nil
			}
		}
		for layer, mk := range layers {
			t.Run(name+"/"+layer, func(t *testing.T) {
				args, env := mk()
				var stderr bytes.Buffer
				su, code, ok := resolveServer(append(append([]string{}, base...), args...), env, &stderr)
				if !ok {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				if !c.ok(su, &stderr) {
					t.Fatalf("%s=%q did not take effect: %+v", name, c.value, su.cfg)
				}
			})
		}
	}
	// A list in the file for the settings that are lists.
	file := writeFile(t, t.TempDir(), "c.yaml", "peers:\n  - n0-127.0.0.1:20911\n  - n1-127.0.0.1:20912\n  - n2-127.0.0.1:20913\n"+
		"preferredLeaderIds: [n2, n1]\n", 0o644)
	su := resolveOK(t, []string{"--id", "n0", "--data-dir", required["data-dir"], "--key-file", required["key-file"], "--config", file}, nil)
	if su.cfg.Peers != cfgPeers3 || !reflect.DeepEqual(su.election.PreferredLeaderIDs, []string{"n2", "n1"}) {
		t.Fatalf("lists: peers %q, preferred %v", su.cfg.Peers, su.election.PreferredLeaderIDs)
	}
}

func TestEnvironmentVariableNames(t *testing.T) {
	for flagName, want := range map[string]string{
		"group": "DLEDGER_GROUP", "id": "DLEDGER_ID", "peers": "DLEDGER_PEERS", "data-dir": "DLEDGER_DATA_DIR",
		"heartbeat-interval": "DLEDGER_HEARTBEAT_INTERVAL", "key-file": "DLEDGER_KEY_FILE",
		"insecure-no-peer-auth": "DLEDGER_INSECURE_NO_PEER_AUTH", "config": "DLEDGER_CONFIG",
		"max-take-leadership-vote-interval": "DLEDGER_MAX_TAKE_LEADERSHIP_VOTE_INTERVAL",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("--%s: %s, want %s", flagName, got, want)
		}
	}
	key := cfgKeyFile(t)
	data := filepath.Join(t.TempDir(), "data")
	// Everything from the environment, as a container would run it.
	su := resolveOK(t, nil, []string{"DLEDGER_ID=n1", "DLEDGER_PEERS=" + cfgPeers2, "DLEDGER_DATA_DIR=" + data,
		"DLEDGER_KEY_FILE=" + key, "PATH=/bin", "DLEDGER_HTTP=", "HOME=/root"})
	if su.cfg.SelfID != "n1" || su.cfg.DataDir != data || su.daemon.HTTPAddr != "127.0.0.1:21912" || len(su.warnings) != 0 {
		t.Fatalf("from the environment: %+v, warnings %q (an empty DLEDGER_HTTP is unset: the default address)", su.cfg, su.warnings)
	}
	// A variable that is no setting is a warning, not an error: Kubernetes sets DLEDGER_SERVICE_HOST
	// and friends for a Service named dledger. A near miss says what was meant.
	su = resolveOK(t, nil, []string{"DLEDGER_ID=n1", "DLEDGER_PEERS=" + cfgPeers2, "DLEDGER_DATA_DIR=" + data, "DLEDGER_KEY_FILE=" + key,
		"DLEDGER_SERVICE_HOST=10.0.0.1", "DLEDGER_HEARTBEAT_INTERVALL=100", "DLEDGER_SELF_ID=n0", "DLEDGER_HEART_BEAT_TIME_INTERVAL_MS=5"})
	want := []string{
		"environment variable DLEDGER_SERVICE_HOST is not a setting, ignored",
		"environment variable DLEDGER_HEARTBEAT_INTERVALL is not a setting, ignored (did you mean DLEDGER_HEARTBEAT_INTERVAL?)",
		"environment variable DLEDGER_SELF_ID is not a setting, ignored (did you mean DLEDGER_ID?)",
		"environment variable DLEDGER_HEART_BEAT_TIME_INTERVAL_MS is not a setting, ignored (did you mean DLEDGER_HEARTBEAT_INTERVAL?)",
	}
	if !reflect.DeepEqual(su.warnings, want) || su.cfg.SelfID != "n1" || su.election.HeartBeatInterval != 200*time.Millisecond {
		t.Fatalf("warnings %q\nwant %q (and id n1, heartbeat 200ms: got %s, %v)", su.warnings, want, su.cfg.SelfID, su.election.HeartBeatInterval)
	}
	// --validate is not a setting: it is a mode of the command line.
	su = resolveOK(t, nil, []string{"DLEDGER_ID=n1", "DLEDGER_PEERS=" + cfgPeers2, "DLEDGER_DATA_DIR=" + data, "DLEDGER_KEY_FILE=" + key, "DLEDGER_VALIDATE=true"})
	if su.validate || len(su.warnings) != 1 {
		t.Fatalf("DLEDGER_VALIDATE: validate %v, warnings %q", su.validate, su.warnings)
	}
	// A bad value names the variable.
	var stderr bytes.Buffer
	if _, code, ok := resolveServer([]string{"--id", "n0", "--peers", cfgPeers2, "--data-dir", data, "--key-file", key},
		[]string{"DLEDGER_MAX_HEARTBEAT_LEAK=many"}, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), `DLEDGER_MAX_HEARTBEAT_LEAK="many"`) {
		t.Fatalf("bad value: exit %d, %q", code, stderr.String())
	}
}

// A file with anything but known settings is refused, naming the file, the line and (for a near
// miss) the key that was meant; so is a setting given twice and a value of the wrong shape.
// Nothing is created.
func TestConfigFileRefusesWhatItDoesNotKnow(t *testing.T) {
	key := cfgKeyFile(t)
	for _, c := range []struct{ name, content, want string }{
		{"misspelt key", "selfId: n0\nheartBeatTimeIntervalMS: 100\n", `:2: unknown setting "heartBeatTimeIntervalMS" (did you mean heartBeatTimeIntervalMs?)`},
		{"misspelt key far from any", "selfId: n0\nbrokerName: a\n", `:2: unknown setting "brokerName"`},
		{"near miss of ours", "selfId: n0\nkeyfile: /k\n", `unknown setting "keyfile" (did you mean keyFile?)`},
		{"validate is no setting", "validate: true\n", `unknown setting "validate"`},
		{"config is no setting", "config: other.yaml\n", `unknown setting "config"`},
		{"twice under two names", "selfId: n0\nid: n1\n", ":2: id sets what selfId on line 1 already set (--id)"},
		{"twice under one name", "group: a\ngroup: b\n", ":2: group sets what group on line 1 already set (--group)"},
		{"no value", "selfId:\n", ":1: selfId: no value"},
		{"a mapping", "selfId:\n  name: n0\n", ":2: selfId: want a single value"},
		{"a list where none is", "selfId: [n0]\n", ":1: selfId: want a single value"},
		{"a nested list in peers", "peers: [[n0-127.0.0.1:1]]\n", "want a list of strings"},
		{"not a mapping", "- selfId: n0\n", ":1: want settings"},
		{"two documents", "selfId: n0\n---\nselfId: n1\n", "more than one YAML document"},
		{"not YAML", "selfId: [n0\n", "config file"},
		{"bad value", "selfId: n0\nmaxHeartBeatLeak: lots\n", `:2: maxHeartBeatLeak: strconv.Atoi: parsing "lots"`},
		{"bad duration", "selfId: n0\nminVoteIntervalMs: 1h-\n", `:2: minVoteIntervalMs: "1h-" is neither milliseconds`},
		{"missing file", "", "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "missing.yaml")
			if c.content != "" {
				file = writeFile(t, dir, "n0.yaml", c.content, 0o644)
			}
			data := filepath.Join(dir, "data")
			var stdout, stderr bytes.Buffer
			// --validate: were the file accepted by mistake, the command would exit 0, not serve.
			code := run([]string{"server", "--validate", "--config", file, "--peers", cfgPeers2, "--data-dir", data, "--key-file", key}, &stdout, &stderr)
			line := stderr.String()
			if code != 2 || strings.Count(line, "\n") != 1 || !strings.Contains(line, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, line, c.want)
			}
			if c.content != "" && !strings.Contains(line, file) {
				t.Fatalf("%q does not name the file", line)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused file left a data dir (%v)", err)
			}
		})
	}
	// An empty file, or one of comments only, sets nothing.
	for _, content := range []string{"", "# nothing yet\n"} {
		file := writeFile(t, t.TempDir(), "empty.yaml", content, 0o644)
		resolveOK(t, []string{"--config", file, "--id", "n0", "--peers", cfgPeers2, "--data-dir", "/d", "--key-file", key}, nil)
	}
}

// The example file the systemd unit reads is a valid file (with this machine's key and data dir).
func TestExampleConfigFile(t *testing.T) {
	file := filepath.Join("..", "..", "scripts", "systemd", "n0.yaml")
	pair := tlstest.NewCA(t, "example").Server(t, "n0")
	su := resolveOK(t, []string{"--config", file, "--key-file", cfgKeyFile(t), "--data-dir", filepath.Join(t.TempDir(), "n0"),
		"--cert-file", pair.CertFile, "--cert-key-file", pair.Key}, nil)
	if su.cfg.Group != "broker-a" || su.cfg.SelfID != "n0" || su.cfg.Peers != "n0-10.0.0.10:20911;n1-10.0.0.11:20911;n2-10.0.0.12:20911" ||
		su.daemon.HTTPAddr != "127.0.0.1:21911" || su.cfg.Profile != "lan" || su.daemon.TLS == nil {
		t.Fatalf("example: %+v", su.cfg)
	}
	// Its metrics address is another host's: without the certificate the example would not start.
	resolveFails(t, []string{"--config", file, "--key-file", cfgKeyFile(t), "--data-dir", "/d", "--cert-file=", "--cert-key-file="},
		nil, `metrics address "10.0.0.10:22911" (--metrics) can be reached from other hosts`)
	// The commented-out timings are known keys with their profile values.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var uncommented []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") && strings.Contains(l, ": ") && !strings.Contains(l, " # ") && !strings.HasPrefix(l, "# ") {
			uncommented = append(uncommented, strings.TrimPrefix(l, "#"))
		}
	}
	if len(uncommented) < 9 {
		t.Fatalf("found %d commented settings in the example", len(uncommented))
	}
	timings := writeFile(t, t.TempDir(), "timings.yaml", strings.Join(uncommented, "\n")+"\n", 0o644)
	su2 := resolveOK(t, []string{"--config", timings, "--key-file", cfgKeyFile(t), "--data-dir", "/d",
		"--id", "n0", "--peers", cfgPeers2, "--admin-token-file", writeFile(t, t.TempDir(), "tok", strings.Repeat("x", 20), 0o600)}, nil)
	if su2.election.HeartBeatInterval != 200*time.Millisecond || !reflect.DeepEqual(su2.election.PreferredLeaderIDs, []string{"n0", "n1"}) {
		t.Fatalf("example timings: %+v", su2.election)
	}
}

// --validate checks everything a start would, creates nothing, and exits 0 or 2.
func TestValidateCreatesNothing(t *testing.T) {
	root := t.TempDir()
	key := cfgKeyFile(t)
	looseKey := cfgKeyFile(t)
	if err := os.Chmod(looseKey, 0o644); err != nil {
		t.Fatal(err)
	}
	token := writeFile(t, root, "token", strings.Repeat("t", 24), 0o600)
	looseToken := writeFile(t, root, "loose-token", strings.Repeat("t", 24), 0o644)
	aFile := writeFile(t, root, "a-file", "", 0o644)
	existing := filepath.Join(root, "existing")
	store, err := memberstate.OpenFileStore(existing, memberstate.Owner{Group: "default", SelfID: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(memberstate.Durable{Term: 3, VoteFor: "n1"}); err != nil {
		t.Fatal(err)
	}
	// The member is "running": validating its settings meanwhile is fine (the lock is its business).
	defer store.Close()
	corrupt := filepath.Join(root, "corrupt")
	if err := os.Mkdir(corrupt, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, corrupt, memberstate.StateFileName, "garbage", 0o644)
	conf := writeFile(t, root, "n0.yaml", "selfId: n0\npeers: "+cfgPeers2+"\nkeyFile: "+key+"\n", 0o644)

	newDir := filepath.Join(root, "new", "deeper", "data")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in stdout (0) or the one stderr line (2)
	}{
		{"new data dir", []string{"--data-dir", newDir}, 0, "data dir " + newDir + " (will be created)"},
		{"existing data dir", []string{"--data-dir", existing, "--admin-token-file", token}, 0, "(exists)"},
		{"data dir under a file", []string{"--data-dir", filepath.Join(aFile, "data")}, 2, aFile + " is not a directory"},
		{"data dir is a file", []string{"--data-dir", aFile}, 2, "is not a directory"},
		{"corrupt vote.state", []string{"--data-dir", corrupt}, 2, "corrupt"},
		{"loose key file", []string{"--data-dir", newDir, "--key-file", looseKey}, 2, "chmod 600"},
		{"missing key file", []string{"--data-dir", newDir, "--key-file", key + ".gone"}, 2, "no such file"},
		{"loose token file", []string{"--data-dir", newDir, "--admin-token-file", looseToken}, 2, "chmod 600"},
		{"unknown env var only warns", []string{"--data-dir", newDir}, 0, "settings valid"},
		{"self not a member", []string{"--data-dir", newDir, "--id", "n5"}, 2, "n5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := treeOf(t, root)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"server", "--config", conf, "--validate"}, c.args...), &stdout, &stderr)
			out := stdout.String()
			if c.code == 2 {
				out = stderr.String()
				if strings.Count(out, "\n") != 1 {
					t.Fatalf("want one line on stderr, got %q", out)
				}
			}
			if code != c.code || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d with %q", code, stdout.String(), stderr.String(), c.code, c.want)
			}
			if after := treeOf(t, root); !reflect.DeepEqual(before, after) {
				t.Fatalf("--validate changed the file system:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the data dir's parent exists after --validate (%v)", err)
	}
}

// treeOf lists every path under root with its size and mode.
func treeOf(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, path+" "+info.Mode().String()+" "+info.ModTime().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDidYouMean(t *testing.T) {
	known := []string{"selfId", "peers", "heartBeatTimeIntervalMs", "dataDir"}
	for in, want := range map[string]string{
		"selfid":                 " (did you mean selfId?)",
		"selfID":                 " (did you mean selfId?)",
		"peer":                   " (did you mean peers?)",
		"heartBeatTimeIntervalM": " (did you mean heartBeatTimeIntervalMs?)",
		"datadir":                " (did you mean dataDir?)",
		"brokerName":             "",
		"x":                      "",
	} {
		if got := didYouMean(in, known); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// --validate refuses a data dir on a kernel filesystem, as the start does (where it fails only
// when it creates the dir), although access(2) lets root create entries there.
func TestValidateRefusesADataDirOnAKernelFilesystem(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("knows Linux's kernel filesystems only")
	}
	key := writeGroupKey(t, t.TempDir())
	for _, dir := range []string{"/proc/dledger-data", "/proc", "/sys/dledger-data", "/sys/kernel/dledger/data"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"server", "--validate", "--id", "n0", "--peers", "n0-127.0.0.1:1", "--key-file", key,
			"--data-dir", dir}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "kernel filesystem") {
			t.Errorf("--validate --data-dir %s: exit %d, %q%q; want 2 naming the kernel filesystem", dir, code,
				stdout.String(), stderr.String())
		}
	}
}
