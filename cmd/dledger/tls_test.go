package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
	"github.com/dledger-go/dledger/server/daemon"
	"github.com/dledger-go/dledger/server/tlsfiles"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

// resolveFails resolves the server's settings and wants exit status 2 with want in the line.
func resolveFails(t *testing.T, args, environ []string, want string) {
	t.Helper()
	var stderr bytes.Buffer
	_, code, ok := resolveServer(args, environ, &stderr)
	if ok || code != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("server %q: ok=%v exit %d: %q, want exit 2 with %q", args, ok, code, stderr.String(), want)
	}
}

// The server's TLS flags: bad files and combinations are refused at start (exit 2) with the
// reason; an address other hosts can reach needs TLS or --insecure-network-trusted; --validate
// says HTTPS.
func TestServerTLSFlagsRefuseBadInputAtStart(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	good, other := ca.Server(t, "good"), ca.Server(t, "other")
	dir := t.TempDir()
	looseKey := writeFile(t, dir, "loose.key", string(good.KeyPEM), 0o644)
	base := []string{"--id", "n0", "--peers", cfgPeers2, "--data-dir", filepath.Join(dir, "data"), "--key-file", cfgKeyFile(t)}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing certificate", with("--cert-file", filepath.Join(dir, "none.pem"), "--cert-key-file", good.Key),
			"admin TLS (--cert-file, --cert-key-file): certificate file: open"},
		{"certificate without key", with("--cert-file", good.CertFile), "given without its key file"},
		{"mismatched pair", with("--cert-file", good.CertFile, "--cert-key-file", other.Key), "private key does not match public key"},
		{"key readable by others", with("--cert-file", good.CertFile, "--cert-key-file", looseKey), "readable by group or others (mode 0644): chmod 600"},
		{"unreadable key (a directory)", with("--cert-file", good.CertFile, "--cert-key-file", dir), "is not a regular file"},
		{"CA without certificate", with("--trusted-ca-file", ca.File), "--trusted-ca-file needs --cert-file and --cert-key-file"},
		{"client certificates without CA", with("--cert-file", good.CertFile, "--cert-key-file", good.Key, "--client-cert-auth"),
			"needs TLS (--cert-file, --cert-key-file) and the CA"},
		{"public admin in plain HTTP", with("--http", "0.0.0.0:21911", "--admin-token-file", writeFile(t, dir, "tok", strings.Repeat("t", 24), 0o600)),
			`admin address "0.0.0.0:21911" (--http) can be reached from other hosts`},
		{"public metrics in plain HTTP", with("--metrics", "10.0.0.1:22911"), "--insecure-network-trusted"},
	} {
		t.Run(c.name, func(t *testing.T) { resolveFails(t, c.args, nil, c.want) })
	}
	su := resolveOK(t, with("--metrics", "10.0.0.1:22911", "--insecure-network-trusted"), nil)
	if su.daemon.TLS != nil || !su.daemon.InsecureNetworkTrusted {
		t.Fatalf("trusted network: %+v", su.daemon)
	}
	// The environment and the config file name them as every other setting.
	su = resolveOK(t, base, []string{"DLEDGER_METRICS=0.0.0.0:22911", "DLEDGER_CERT_FILE=" + good.CertFile,
		"DLEDGER_CERT_KEY_FILE=" + good.Key, "DLEDGER_TRUSTED_CA_FILE=" + ca.File, "DLEDGER_CLIENT_CERT_AUTH=true"})
	if su.daemon.TLS == nil || !su.daemon.TLS.HasCA() || !su.daemon.ClientCertAuth || len(su.reloaders) != 1 {
		t.Fatalf("from the environment: %+v, %d reloaders", su.daemon, len(su.reloaders))
	}
	su = resolveOK(t, with("--cert-file", good.CertFile, "--cert-key-file", good.Key, "--trusted-ca-file", ca.File, "--client-cert-auth=all"), nil)
	if !su.daemon.ClientCertAuth || !su.daemon.ClientCertAuthReads {
		t.Fatalf("--client-cert-auth=all: %+v", su.daemon)
	}
	resolveFails(t, with("--cert-file", good.CertFile, "--cert-key-file", good.Key, "--trusted-ca-file", ca.File, "--client-cert-auth=some"),
		nil, `-client-cert-auth: "some": want true (writes), all or false`)
	var stdout, stderr bytes.Buffer
	if code := runServer(with("--validate", "--cert-file", good.CertFile, "--cert-key-file", good.Key, "--metrics", "0.0.0.0:22911"),
		&stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), `admin API 127.0.0.1:21911 over HTTPS (certificate "good"`) ||
		!strings.Contains(stdout.String(), "metrics 0.0.0.0:22911 over HTTPS") {
		t.Fatalf("--validate: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}

// The server command's reloader (what SIGHUP runs) swaps the certificate its admin listener
// serves; a bad pair is refused and the old one keeps serving.
func TestServerTLSReloaderSwapsTheServedCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Server(t, "before").WriteTo(t, certFile, keyFile)
	su := resolveOK(t, []string{"--id", "n0", "--peers", cfgPeers2, "--data-dir", "/d", "--key-file", cfgKeyFile(t),
		"--http", "127.0.0.1:0", "--cert-file", certFile, "--cert-key-file", keyFile}, nil)
	if len(su.reloaders) != 1 {
		t.Fatalf("%d reloaders, want the TLS one", len(su.reloaders))
	}
	d, err := daemon.New(su.daemon)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	d.Serve()
	defer d.Stop(context.Background())
	served := func() string {
		t.Helper()
		cfg, err := tlsfiles.ClientConfig(ca.File, "", "")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", d.HTTPAddr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "before" {
		t.Fatalf("served %q", got)
	}
	ca.Server(t, "after").WriteTo(t, certFile, keyFile)
	if err := su.reloaders[0].reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "after" {
		t.Fatalf("after the reload: served %q, want after", got)
	}
	if err := os.Chmod(keyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := su.reloaders[0].reload(); err == nil || !strings.Contains(err.Error(), "readable by group or others") ||
		!strings.Contains(err.Error(), `still serving the certificate loaded at`) {
		t.Fatalf("reload of a loose key: %v", err)
	}
	if got := served(); got != "after" {
		t.Fatalf("after a refused reload: served %q, want after", got)
	}
}

// dledger status, transfer, watch and groups list over HTTPS against a group whose admin API
// wants client certificates for writes: status finds every member from one address (the
// advertised host:port addresses are asked over HTTPS too), transfer without a client
// certificate is refused for it and with one moves leadership, watch prints the events, and a
// wrong CA or a plain-HTTP client gets an error that says what to give.
func TestCLIOverHTTPS(t *testing.T) {
	const limit = 20 * time.Second
	ca := tlstest.NewCA(t, "admin")
	pair := ca.Server(t, "members")
	store, err := tlsfiles.Load(tlsfiles.Files{Cert: pair.CertFile, Key: pair.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.Repeat("k", 24)
	tokenFile := writeFile(t, t.TempDir(), "token", token, 0o600)
	members, addr, leader := startTLSGroup(t, daemon.Config{AdminToken: token, TLS: store, ClientCertAuth: true})
	leaderOf := func() string {
		for _, s := range members {
			if st := s.Status(); st.Role == protocol.LEADER {
				return st.SelfID
			}
		}
		return ""
	}
	run := func(cmd func([]string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := cmd(args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	status := func(args []string, o, e *bytes.Buffer) int { return runStatus(args, o, e) }
	transfer := func(args []string, o, e *bytes.Buffer) int { return runTransfer(args, o, e) }
	groups := func(args []string, o, e *bytes.Buffer) int { return runGroups(args, o, e) }

	// Discovery asks the peers over rpc, whose links may still be coming up: wait for all three.
	var code int
	var out, errOut string
	dledgertest.Eventually(t, limit, "status over HTTPS finds every member", func() bool {
		code, out, errOut = run(status, "--http", addr["n1"], "--cacert", ca.File, "--timeout", "5s")
		return code == 0
	})
	if strings.Count(out, addr["n0"])+strings.Count(out, addr["n1"])+strings.Count(out, addr["n2"]) != 3 {
		t.Fatalf("status over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no CA, bare address", []string{"--http", addr["n1"]}, "the member serves HTTPS: ask it at https://"},
		{"no CA, https address", []string{"--http", "https://" + addr["n1"]}, "--cacert FILE"},
		{"another CA", []string{"--http", addr["n1"], "--cacert", tlstest.NewCA(t, "other").File}, "--cacert FILE"},
	} {
		if code, out, errOut := run(status, append(c.args, "--timeout", "5s")...); code != 1 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("status, %s: exit %d, want 1 with %q:\n%s%s", c.name, code, c.want, out, errOut)
		}
	}
	if code, _, errOut := run(status, "--http", addr["n1"], "--cacert", filepath.Join(t.TempDir(), "none.pem")); code != 2 ||
		!strings.Contains(errOut, "CA file: open") {
		t.Errorf("status with a missing --cacert: exit %d: %s", code, errOut)
	}
	if code, out, errOut := run(groups, "list", "--http", addr["n0"], "--cacert", ca.File); code != 0 || !strings.Contains(out, "g ") {
		t.Errorf("groups list over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	membersCmd := func(args []string, o, e *bytes.Buffer) int { return runMembers(args, o, e) }
	if code, out, errOut := run(membersCmd, "list", "--http", addr["n1"], "--cacert", ca.File); code != membersDone || !strings.Contains(out, addr["n2"][:strings.LastIndex(addr["n2"], ":")]) {
		t.Errorf("members list over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(membersCmd, "list", "--http", addr["n1"]); code != membersRefused || !strings.Contains(out+errOut, "the member serves HTTPS") {
		t.Errorf("members list over plain HTTP to an HTTPS member: exit %d, want %d with a hint\n%s%s", code, membersRefused, out, errOut)
	}
	// A write reaches the leader (following a follower's refusal over HTTPS) and is answered on
	// its merits: removing a member that does not exist.
	if code, out, errOut := run(membersCmd, "remove", "--http", addr["n1"], "--cacert", ca.File, "--token-file", tokenFile,
		"--cert", ca.Client(t, "ops").CertFile, "--key", ca.Client(t, "ops").Key, "--id", "n9", "--timeout", "10s"); code != membersRefused || !strings.Contains(out+errOut, "n9") {
		t.Errorf("members remove of a non-member over HTTPS: exit %d, want %d naming n9\n%s%s", code, membersRefused, out, errOut)
	}

	to := "n0"
	if leader == "n0" {
		to = "n1"
	}
	code, out, errOut = run(transfer, "--http", addr[leader], "--cacert", ca.File, "--token-file", tokenFile, "--to", to)
	if code != transferRefused || !strings.Contains(errOut, "HTTP 403") || !strings.Contains(errOut, "--cert FILE --key FILE") {
		t.Fatalf("transfer without a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	if now := leaderOf(); now != leader {
		t.Fatalf("a refused transfer moved leadership from %s to %s", leader, now)
	}
	ops := ca.Client(t, "ops")
	// Watch the member handed leadership to while the transfer runs.
	watchOut := &lockedBuffer{}
	cfg, err := tlsfiles.ClientConfig(ca.File, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchClient{addr: addr[to], stdout: watchOut, stderr: &lockedBuffer{}, tls: cfg}
	watchDone := make(chan int, 1)
	go func() { watchDone <- w.run(ctx) }()
	dledgertest.Eventually(t, limit, "watch over HTTPS prints the current state", func() bool {
		return strings.Contains(watchOut.String(), "role=FOLLOWER")
	})
	code, out, errOut = run(transfer, "--http", addr[leader], "--cacert", ca.File, "--token-file", tokenFile, "--to", to,
		"--cert", ops.CertFile, "--key", ops.Key)
	if code != transferDone {
		t.Fatalf("transfer with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	dledgertest.Eventually(t, limit, "watch over HTTPS prints the new leadership", func() bool {
		return strings.Contains(watchOut.String(), "role=LEADER")
	})
	cancel()
	if code := <-watchDone; code != 0 {
		t.Fatalf("watch exit %d", code)
	}
}

// startTLSGroup starts a group of three members in this process, each with an admin API on
// loopback configured as dc, and waits until one leads and every member follows it.
func startTLSGroup(t *testing.T, dc daemon.Config) (members []*server.Server, addr map[string]string, leader string) {
	t.Helper()
	election := calmElection() // the leader read below must stay the leader
	peers := dledgertest.PeersString(dledgertest.FreePorts(t, 3))
	addr = map[string]string{}
	dc.HTTPAddr = "127.0.0.1:0"
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("n%d", i)
		s, d := daemonMember(t, server.Config{Group: "g", SelfID: id, Peers: peers, DataDir: t.TempDir(), Insecure: true,
			Ledger: server.LedgerNone, Election: election}, dc)
		addr[id] = d.HTTPAddr()
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		members = append(members, s)
	}
	dledgertest.Eventually(t, 20*time.Second, "a leader every member follows", func() bool {
		leader = ""
		for _, s := range members {
			if st := s.Status(); st.Role == protocol.LEADER {
				leader = st.SelfID
			}
		}
		for _, s := range members {
			if leader == "" || s.Status().LeaderID != leader {
				return false
			}
		}
		return true
	})
	return members, addr, leader
}

// Real processes: `dledger server` with the TLS flags serves HTTPS and wants client certificates
// for writes; the built `dledger status` and `transfer` speak HTTPS with --cacert (--cert, --key);
// a key readable by others stops a start with exit status 2 and the reason.
func TestRealProcessesServeHTTPS(t *testing.T) {
	ca := tlstest.NewCA(t, "members")
	pair, ops := ca.Server(t, "member"), ca.Client(t, "ops")
	g := newProcGroup(t, 3, "--cert-file", pair.CertFile, "--cert-key-file", pair.Key, "--trusted-ca-file", ca.File, "--client-cert-auth")
	looseKey := writeFile(t, t.TempDir(), "loose.key", string(pair.KeyPEM), 0o640)
	_, errOut, code := runTool(t, g.bin, "server", "--id", "n0", "--peers", g.peers, "--data-dir", g.dirs[0], "--key-file", g.keyFile,
		"--cert-file", pair.CertFile, "--cert-key-file", looseKey)
	if code != 2 || !strings.Contains(errOut, "readable by group or others (mode 0640): chmod 600 "+looseKey) {
		t.Fatalf("a loose certificate key: exit %d: %s", code, errOut)
	}
	for i := range g.procs {
		g.start(i)
	}
	const limit = 30 * time.Second // generous: CI is a busy 2-core machine
	cfg, err := tlsfiles.ClientConfig(ca.File, "", "")
	if err != nil {
		t.Fatal(err)
	}
	client := adminclient.HTTPClient(cfg)
	client.Timeout = time.Second
	var leader string
	dledgertest.Eventually(t, limit, "a leader every member follows, read over HTTPS", func() bool {
		leader = ""
		var followers int
		for _, a := range g.https {
			st, err := (&adminclient.Client{Addr: a, HTTP: client}).Status(context.Background())
			switch {
			case err != nil:
				return false
			case st.Role == "LEADER":
				leader = st.SelfID
			case st.LeaderID != "":
				followers++
			}
		}
		return leader != "" && followers == 2
	})
	var rep statusReport
	dledgertest.Eventually(t, limit, "status --cacert reads all three members", func() bool {
		rep, code = statusJSON(t, g.bin, "--http", g.https[1], "--cacert", ca.File)
		return code == 0
	})
	roles := map[string]int{}
	for _, m := range rep.Members {
		if m.Status != nil {
			roles[m.Status.Role]++
		}
	}
	if len(rep.Members) != 3 || roles["LEADER"] != 1 || roles["FOLLOWER"] != 2 {
		t.Fatalf("status over HTTPS: %+v", rep)
	}
	to := "n0"
	if leader == "n0" {
		to = "n1"
	}
	li := int(leader[1] - '0')
	if _, errOut, code := runTool(t, g.bin, "transfer", "--http", g.https[li], "--cacert", ca.File, "--to", to); code != 1 ||
		!strings.Contains(errOut, "HTTP 403") {
		t.Fatalf("transfer without a client certificate: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runTool(t, g.bin, "transfer", "--http", g.https[li], "--cacert", ca.File, "--cert", ops.CertFile,
		"--key", ops.Key, "--to", to); code != 0 || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("transfer with a client certificate: exit %d: %s%s", code, out, errOut)
	}
}

// With --client-cert-auth=all the tools need --cert and --key for reads too: status without
// them is refused and says so, with them reads every member.
func TestCLIWithClientCertificatesForEverything(t *testing.T) {
	ca := tlstest.NewCA(t, "admin")
	pair, ops := ca.Server(t, "members"), ca.Client(t, "ops")
	store, err := tlsfiles.Load(tlsfiles.Files{Cert: pair.CertFile, Key: pair.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	_, addr, _ := startTLSGroup(t, daemon.Config{TLS: store, ClientCertAuthReads: true})
	var stdout, stderr bytes.Buffer
	if code := runStatus([]string{"--http", addr["n0"], "--cacert", ca.File}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stdout.String()+stderr.String(), "--cert FILE --key FILE") {
		t.Fatalf("status without a client certificate: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	dledgertest.Eventually(t, 20*time.Second, "status with a client certificate reads every member", func() bool {
		stdout.Reset()
		stderr.Reset()
		return runStatus([]string{"--http", addr["n0"], "--cacert", ca.File, "--cert", ops.CertFile, "--key", ops.Key}, &stdout, &stderr) == 0
	})
}
