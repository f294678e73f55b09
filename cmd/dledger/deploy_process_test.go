package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// forwarder relays TCP connections from one loopback address to another, as a Kubernetes
// Service (port != targetPort) or a NAT does: what the others dial is not what the member binds.
type forwarder struct {
	ln    net.Listener
	to    string
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  map[net.Conn]bool
}

func startForwarder(t *testing.T, from, to string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", from)
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, to: to, open: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil { // closed
		c.Close()
		return false
	}
	f.open[c] = true
	return true
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.conns.Add(1)
		out, err := net.DialTimeout("tcp", f.to, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !f.track(in) || !f.track(out) {
			in.Close()
			out.Close()
			continue
		}
		for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
			f.wg.Add(1)
			go func(dst, src net.Conn) {
				defer f.wg.Done()
				io.Copy(dst, src)
				dst.Close() // a half-closed relay is as good as closed for these connections
				src.Close()
			}(p[0], p[1])
		}
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.open {
		c.Close()
	}
	f.open = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// Three real processes configured as the Kubernetes example configures its pods: the member id
// from the pod name (DLEDGER_ID_FROM_POD_NAME=dledger-<i>, not --id), each member binding
// --listen 127.0.0.1:L<i> while its peers entry says 127.0.0.1:A<i>, an address only a
// forwarder (the "Service") listens on. They elect a leader, so the others dialled the
// advertised addresses and the members bound the listen ones; a member that bound its peers
// entry instead would find it taken and exit.
func TestRealProcessesIDFromPodNameAndListenAdvertiseSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	key := writeGroupKey(t, dir)
	ports := dledgertest.FreePorts(t, 9)
	advertised, listen, https := ports[0:3], ports[3:6], ports[6:9]
	var peers []string
	fwd := make([]*forwarder, 3)
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d-127.0.0.1:%d", i, advertised[i]))
		fwd[i] = startForwarder(t, fmt.Sprintf("127.0.0.1:%d", advertised[i]), fmt.Sprintf("127.0.0.1:%d", listen[i]))
	}
	logs := make([]string, 3)
	procs := make([]*exec.Cmd, 3)
	g := &procGroup{t: t, logs: logs}
	g.keepLogsOnFailure()
	t.Cleanup(func() {
		for _, p := range procs {
			if p != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	})
	for i := range 3 {
		logs[i] = filepath.Join(dir, fmt.Sprintf("dledger-%d.log", i))
		logf, err := os.Create(logs[i])
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "server", "--group", "k8s", "--peers", strings.Join(peers, ";"),
			"--listen", fmt.Sprintf("127.0.0.1:%d", listen[i]), "--http", fmt.Sprintf("127.0.0.1:%d", https[i]),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", i)), "--key-file", key,
			"--heartbeat-interval", "100ms", "--min-vote-interval", "50", "--max-vote-interval", "150", "--vote-round-base", "200ms")
		cmd.Env = append(os.Environ(), fmt.Sprintf("DLEDGER_ID_FROM_POD_NAME=dledger-%d", i))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		procs[i] = cmd
	}
	client := &http.Client{Timeout: 500 * time.Millisecond}
	dledgertest.AwaitLeader(t, 30*time.Second, 3, func() []dledgertest.Member {
		var v []dledgertest.Member
		for i := range 3 {
			if st, err := fetchStatus(client, fmt.Sprintf("127.0.0.1:%d", https[i])); err == nil {
				if want := fmt.Sprintf("n%d", i); st.SelfID != want {
					t.Fatalf("pod dledger-%d runs as member %q, want %s", i, st.SelfID, want)
				}
				v = append(v, dledgertest.Member{ID: st.SelfID, Up: true, Leading: st.Role == "LEADER",
					LeaderID: st.LeaderID, Term: st.Term})
			}
		}
		return v
	})
	// Every member says in its "member started" line which address it bound (a quorum is two,
	// so the third may still be starting when the leader is found).
	for i := range 3 {
		want := fmt.Sprintf(`"rpc":"127.0.0.1:%d"`, listen[i])
		dledgertest.Eventually(t, 30*time.Second, fmt.Sprintf("dledger-%d's log to say %s", i, want), func() bool {
			b, _ := os.ReadFile(logs[i])
			return bytes.Contains(b, []byte(`"msg":"member started"`)) && bytes.Contains(b, []byte(want))
		})
		if n := fwd[i].conns.Load(); n == 0 {
			t.Errorf("nobody dialled n%d's advertised address 127.0.0.1:%d", i, advertised[i])
		}
	}
}

// A name that is not <statefulset>-<ordinal> stops the real binary with exit status 2, a line
// naming the setting, and no data dir: a pod never runs under a guessed id.
func TestRealProcessRefusesPodNameWithoutOrdinal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a real process")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "server", "--peers", cfgPeers3, "--data-dir", data, "--key-file", writeGroupKey(t, dir))
	cmd.Env = append(os.Environ(), "DLEDGER_ID_FROM_POD_NAME=dledger")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2; stderr: %s", err, stderr.String())
	}
	want := `dledger server: DLEDGER_ID_FROM_POD_NAME: "dledger" is not a StatefulSet pod name <statefulset>-<ordinal> (dledger-2 gives member id n2)`
	if got := strings.TrimSpace(stderr.String()); got != want {
		t.Fatalf("stderr %q, want %q", got, want)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir after a refused start: %v", err)
	}
}
