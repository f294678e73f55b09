package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// notifyListener is a fake systemd: the unixgram socket NOTIFY_SOCKET names.
func notifyListener(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// nextNotification reads one datagram, waiting at most limit.
func nextNotification(conn *net.UnixConn, limit time.Duration) (string, error) {
	conn.SetReadDeadline(time.Now().Add(limit))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	return string(buf[:n]), err
}

func TestSdNotify(t *testing.T) {
	if err := sdNotify("", "READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v, want a silent no-op", err)
	}
	path := filepath.Join(t.TempDir(), "notify")
	conn := notifyListener(t, path)
	abstract := notifyListener(t, fmt.Sprintf("@dledger-test-%d", os.Getpid()))
	for _, c := range []struct {
		socket string
		conn   *net.UnixConn
	}{{path, conn}, {abstract.LocalAddr().String(), abstract}} {
		if err := sdNotify(c.socket, "READY=1\nSTATUS=serving"); err != nil {
			t.Fatalf("%s: %v", c.socket, err)
		}
		if got, err := nextNotification(c.conn, 10*time.Second); err != nil || got != "READY=1\nSTATUS=serving" {
			t.Fatalf("%s: got %q, %v", c.socket, got, err)
		}
	}
	if err := sdNotify(filepath.Join(t.TempDir(), "gone"), "READY=1"); err == nil {
		t.Fatal("a missing socket: no error")
	}
}

// The real binary tells a fake systemd READY=1 once it serves (its admin API answers at
// once), STOPPING=1 on SIGTERM, and exits 0; with bad settings it exits 2 and says nothing.
func TestServerNotifiesTheServiceManager(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dledger")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "notify")
	conn := notifyListener(t, sock)
	ports := dledgertest.FreePorts(t, 2)
	rpcPort, httpPort := ports[0], ports[1]
	httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "server", "--id", "n0", "--peers", fmt.Sprintf("n0-127.0.0.1:%d", rpcPort),
		"--data-dir", filepath.Join(dir, "data"), "--insecure-no-peer-auth", "--http", httpAddr)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}()
	got, err := nextNotification(conn, 60*time.Second)
	if err != nil || !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, "STATUS=serving group default as n0") {
		t.Fatalf("first notification %q, %v; want READY=1 and a STATUS", got, err)
	}
	// READY comes after Start: the listeners are open, so this needs no retry.
	resp, err := http.Get("http://" + httpAddr + "/v1/status")
	if err != nil {
		t.Fatalf("status right after READY=1: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status right after READY=1: %s", resp.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got, err := nextNotification(conn, 60*time.Second); err != nil || got != "STOPPING=1" {
		t.Fatalf("after SIGTERM: %q, %v; want STOPPING=1", got, err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}

	// Bad settings: exit 2 (the unit's RestartPreventExitStatus) and no READY=1.
	bad := exec.Command(bin, "server", "--id", "n0", "--peers", fmt.Sprintf("n0-127.0.0.1:%d", rpcPort),
		"--data-dir", filepath.Join(dir, "data"))
	bad.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var exitErr *exec.ExitError
	if err := bad.Run(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Fatalf("without a key: %v, want exit status 2", err)
	}
	// The process has exited, so anything it sent is queued already.
	if got, err := nextNotification(conn, 200*time.Millisecond); err == nil {
		t.Fatalf("a member that did not start notified %q", got)
	}
}

// The unit file has what docs/operations.md promises, and systemd-analyze (where installed) accepts it.
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join("..", "..", "scripts", "systemd", "dledger@.service")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]map[string][]string{}
	var section string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			sections[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, i+1, line)
			}
			sections[section][k] = append(sections[section][k], v)
		}
	}
	svc := sections["Service"]
	for _, kv := range []struct{ key, value string }{
		{"Type", "notify"}, {"Restart", "on-failure"}, {"RestartPreventExitStatus", "2"},
		{"ExecStart", "/usr/local/bin/dledger server --config /etc/dledger/%i.yaml"},
		{"Environment", "GOTRACEBACK=crash"}, // a panic must not look like exit status 2
		{"StateDirectory", "dledger/%i"},     // the data dir, writable under ProtectSystem=strict
		{"NoNewPrivileges", "yes"}, {"ProtectSystem", "strict"}, {"PrivateTmp", "yes"}, {"ProtectHome", "yes"},
		{"CapabilityBoundingSet", ""}, {"AmbientCapabilities", ""}, {"PrivateDevices", "yes"},
		{"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"}, // AF_UNIX: the notify socket
		{"User", "dledger"},
	} {
		found := false
		for _, v := range svc[kv.key] {
			found = found || v == kv.value
		}
		if !found {
			t.Errorf("[Service] has no %s=%s (has %q)", kv.key, kv.value, svc[kv.key])
		}
	}
	if sections["Install"]["WantedBy"] == nil {
		t.Error("[Install] has no WantedBy")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: only the keys were checked")
		return
	}
	// verify wants ExecStart's binary to exist: point it at this test binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/dledger", self)
	if err := os.WriteFile(filepath.Join(dir, "dledger@.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "dledger@n0.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
