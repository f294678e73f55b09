package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server/adminclient"
)

// procHosts are `dledger server --config FILE` processes, each a host of many group members
// (configs:), over loopback.
type procHosts struct {
	t           *testing.T
	bin         string
	rpc, admin  []string
	files, logs []string
	procs       []*exec.Cmd
}

// newProcHosts writes n hosts' config files: each host's settings and configs (its entries,
// from configs(i, rpcAddrs)).
func newProcHosts(t *testing.T, n int, configs func(i int, rpc []string) string) *procHosts {
	t.Helper()
	dir := t.TempDir()
	h := &procHosts{t: t, bin: buildBinary(t, dir), procs: make([]*exec.Cmd, n)}
	ports := dledgertest.FreePorts(t, 2*n)
	for i := 0; i < n; i++ {
		h.rpc = append(h.rpc, fmt.Sprintf("127.0.0.1:%d", ports[i]))
		h.admin = append(h.admin, fmt.Sprintf("127.0.0.1:%d", ports[n+i]))
	}
	for i := 0; i < n; i++ {
		file := filepath.Join(dir, fmt.Sprintf("h%d.yaml", i))
		body := fmt.Sprintf("listen: %s\ndata-dir: %s\ninsecure-no-peer-auth: true\nhttp: %s\nlog-level: info\n"+
			"heartbeat-interval: 100ms\nmin-vote-interval: 50\nmax-vote-interval: 150\nvote-round-base: 200ms\n%s",
			h.rpc[i], filepath.Join(dir, fmt.Sprintf("data%d", i)), h.admin[i], configs(i, h.rpc))
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		h.files = append(h.files, file)
		h.logs = append(h.logs, filepath.Join(dir, fmt.Sprintf("h%d.log", i)))
	}
	t.Cleanup(func() {
		for i := range h.procs {
			if h.procs[i] != nil {
				h.procs[i].Process.Kill()
				h.procs[i].Wait()
			}
		}
	})
	(&procGroup{t: t, logs: h.logs}).keepLogsOnFailure()
	return h
}

// logLines are the lines of the log file whose message is msg (zap's JSON "msg").
func logLines(t *testing.T, file, msg string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var e struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == msg {
			out = append(out, l)
		}
	}
	return out
}

func (h *procHosts) start(i int) {
	h.t.Helper()
	logf, err := os.OpenFile(h.logs[i], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(h.bin, "server", "--config", h.files[i])
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.procs[i] = cmd
}

// groups is every host's GET /v1/groups (nil for a host that does not answer).
func (h *procHosts) groups() [][]adminclient.GroupJSON {
	out := make([][]adminclient.GroupJSON, len(h.admin))
	for i, a := range h.admin {
		c := &adminclient.Client{Addr: a, HTTP: &http.Client{Timeout: time.Second}}
		out[i], _ = c.AllGroups(context.Background(), adminclient.GroupsQuery{})
	}
	return out
}

// leaders waits until every group in want has one leader that every member listed follows at
// its term, and returns group -> leader id and term.
func (h *procHosts) leaders(limit time.Duration, want ...string) map[string]adminclient.GroupJSON {
	h.t.Helper()
	var out map[string]adminclient.GroupJSON
	dledgertest.Eventually(h.t, limit, fmt.Sprintf("groups %v to elect", want), func() bool {
		out = map[string]adminclient.GroupJSON{}
		seen := map[string][]adminclient.GroupJSON{}
		for _, gs := range h.groups() {
			for _, g := range gs {
				seen[g.Group] = append(seen[g.Group], g)
			}
		}
		for _, name := range want {
			ms := seen[name]
			if len(ms) == 0 {
				return false
			}
			for _, m := range ms {
				if m.LeaderID == "" || m.LeaderID != ms[0].LeaderID || m.Term != ms[0].Term {
					return false
				}
				if m.SelfID == m.LeaderID {
					out[name] = m
				}
			}
			if _, ok := out[name]; !ok {
				return false
			}
		}
		return true
	})
	return out
}

// Three `dledger server --config` hosts, each a member of groups g0 and g1, and host 0 also
// all three members of group t (DLedger's testThreeServerInOneProxy): every group elects;
// the preferred leader of g1 leads it; status, watch and transfer take --group; a member
// added at run time (groups add) joins and elects, and removing its leader (groups remove)
// elects another without touching the other groups; groups drain moves every group a host
// leads to another host, after which its SIGTERM hands nothing over; SIGTERM stops a host
// cleanly.
func TestRealProcessHostsServeManyGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hosts (-short)")
	}
	peers := func(rpc []string) string {
		return fmt.Sprintf("n0-%s;n1-%s;n2-%s", rpc[0], rpc[1], rpc[2])
	}
	h := newProcHosts(t, 3, func(i int, rpc []string) string {
		c := fmt.Sprintf("configs:\n  - {group: g0, selfId: n%d, peers: %q}\n  - {group: g1, selfId: n%d, peers: %q, preferredLeaderIds: n1}\n",
			i, peers(rpc), i, peers(rpc))
		if i == 0 {
			trio := fmt.Sprintf("a-%s;b-%s;c-%s", rpc[0], rpc[0], rpc[0])
			for _, id := range []string{"a", "b", "c"} {
				c += fmt.Sprintf("  - {group: t, selfId: %s, peers: %q}\n", id, trio)
			}
		}
		return c
	})
	for i := range 3 {
		h.start(i)
	}
	const limit = 30 * time.Second
	lead := h.leaders(limit, "g0", "g1", "t")
	dledgertest.Eventually(t, limit, "the preferred leader n1 to lead g1", func() bool {
		lead = h.leaders(limit, "g0", "g1", "t")
		return lead["g1"].SelfID == "n1"
	})

	// status --group: every member of g0 found from one host. A member is found through its
	// host's link to the asking host, which may still be in a redial's back-off from when that
	// host was not listening yet (elections do not need every link): it is reported
	// unreachable until the link is up, so the test waits for that, as an operator would.
	var out, errOut bytes.Buffer
	var rep statusReport
	code := -1
	dledgertest.Eventually(t, limit, "status --group g0 to reach every member", func() bool {
		out.Reset()
		errOut.Reset()
		rep = statusReport{}
		code = runStatus([]string{"--http", h.admin[2], "--group", "g0", "-o", "json"}, &out, &errOut)
		return code == 0
	})
	if json.Unmarshal(out.Bytes(), &rep) != nil || len(rep.Members) != 3 {
		t.Fatalf("status --group g0: %d\n%s%s", code, out.String(), errOut.String())
	}
	roles := map[string]int{}
	for _, m := range rep.Members {
		roles[m.Status.Role]++
		if m.Status.Group != "g0" || m.Status.LeaderID != lead["g0"].SelfID {
			t.Errorf("status --group g0 lists %+v, want g0 led by %s", m.Status, lead["g0"].SelfID)
		}
	}
	if roles["LEADER"] != 1 || roles["FOLLOWER"] != 2 {
		t.Fatalf("status --group g0: roles %v\n%s", roles, out.String())
	}
	// The single-member routes answer only a process of one member; status says to name a group.
	if _, err := fetchStatus(&http.Client{Timeout: time.Second}, h.admin[0]); err == nil {
		t.Fatal("GET /v1/status on a host of many members answered")
	}
	out.Reset()
	errOut.Reset()
	if code := runStatus([]string{"--http", h.admin[0]}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--group") {
		t.Fatalf("status of a host of many without --group: %d %s", code, errOut.String())
	}

	// watch --group: g0's events as host 1's member sees them, with the group in each.
	var wout, werr lockedBuffer
	w := exec.Command(h.bin, "watch", "--http", h.admin[1], "--group", "g0", "-o", "json")
	w.Stdout, w.Stderr = &wout, &werr
	waitWatch := startChild(t, w, func() { t.Logf("watch stdout:\n%s\nwatch stderr:\n%s", wout.String(), werr.String()) })
	dledgertest.Eventually(t, limit, "watch --group g0 to print the current state", func() bool {
		evs, _ := watchLines(t, wout.String())
		return len(evs) > 0
	})

	// transfer --group: g0's leadership to another member, asked of any host.
	to := "n2"
	if lead["g0"].SelfID == "n2" {
		to = "n0"
	}
	out.Reset()
	errOut.Reset()
	if code := runTransfer([]string{"--http", h.admin[1], "--group", "g0", "--to", to}, &out, &errOut); code != 0 {
		t.Fatalf("transfer --group g0 --to %s: %d %s%s", to, code, out.String(), errOut.String())
	}
	lead = h.leaders(limit, "g0", "g1", "t")
	if lead["g0"].SelfID != to {
		t.Fatalf("g0 led by %+v after the transfer to %s", lead["g0"], to)
	}
	dledgertest.Eventually(t, limit, "watch --group g0 to print the new leader", func() bool {
		evs, _ := watchLines(t, wout.String())
		last := evs[len(evs)-1]
		return last.Leader == to && last.Group == "g0" && last.Member == "n1"
	})
	w.Process.Signal(syscall.SIGINT)
	if err := waitWatch(limit); err != nil {
		t.Fatalf("watch exited with %v on SIGINT, want 0", err)
	}

	// groups add: g2 on every host, at run time.
	for i := range 3 {
		out.Reset()
		errOut.Reset()
		if code := runGroups([]string{"add", "--http", h.admin[i], "--group", "g2", "--id", fmt.Sprintf("n%d", i),
			"--peers", peers(h.rpc)}, &out, &errOut); code != 0 {
			t.Fatalf("groups add g2 on host %d: %d %s%s", i, code, out.String(), errOut.String())
		}
	}
	before := h.leaders(limit, "g0", "g1", "g2", "t")
	// groups remove: g2's leader hands over, another member of g2 leads; g0, g1 and t keep
	// their leader and term.
	l := before["g2"].SelfID
	var li int
	fmt.Sscanf(l, "n%d", &li)
	out.Reset()
	errOut.Reset()
	if code := runGroups([]string{"remove", "--http", h.admin[li], "--group", "g2", "--id", l}, &out, &errOut); code != 0 {
		t.Fatalf("groups remove g2/%s: %d %s%s", l, code, out.String(), errOut.String())
	}
	after := h.leaders(limit, "g0", "g1", "g2", "t")
	if after["g2"].SelfID == l {
		t.Fatalf("g2 still led by the removed %s", l)
	}
	for _, g := range []string{"g0", "g1", "t"} {
		if after[g] != before[g] {
			t.Errorf("group %s changed from %+v to %+v when g2's member left", g, before[g], after[g])
		}
	}
	out.Reset()
	if code := runGroupsList([]string{"--http", h.admin[li]}, &out, &errOut); code != 0 || strings.Contains(out.String(), "g2 ") {
		t.Fatalf("groups list after removing g2/%s: %d\n%s", l, code, out.String())
	}

	// groups drain: host 2 hands over every group it leads (server.Host.Drain behind POST
	// /v1/drain) and leads nothing after; each of those groups is led on another host. Host 2
	// leads g0 first if the steps above left it nothing to hand over.
	var drained []string
	dledgertest.Eventually(t, limit, "host 2 to lead a group before its drain", func() bool {
		drained = drained[:0]
		for _, g := range h.groups()[2] {
			if g.Role == "LEADER" && g.Group != "t" {
				drained = append(drained, g.Group)
			}
		}
		if len(drained) == 0 {
			runTransfer([]string{"--http", h.admin[2], "--group", "g0", "--to", "n2"}, io.Discard, io.Discard)
		}
		return len(drained) > 0
	})
	out.Reset()
	errOut.Reset()
	if code := runGroups([]string{"drain", "--http", h.admin[2]}, &out, &errOut); code != 0 {
		t.Fatalf("groups drain of host 2 (leading %v): %d %s%s", drained, code, out.String(), errOut.String())
	}
	for _, g := range h.groups()[2] {
		if g.Role == "LEADER" {
			t.Fatalf("host 2 still leads %+v after the drain", g)
		}
	}
	moved := h.leaders(limit, drained...)
	for _, g := range drained {
		if moved[g].SelfID == "n2" {
			t.Fatalf("group %s led by the drained host 2: %+v", g, moved[g])
		}
	}

	// SIGTERM of the drained host: it exits 0 with nothing to hand over, so its stop makes no
	// hand-over (each one would be a transfer's vote round, logged "hand-over before stopping").
	h.procs[2].Process.Signal(syscall.SIGTERM)
	err := h.procs[2].Wait()
	h.procs[2] = nil
	if err != nil {
		t.Fatalf("drained host 2 after SIGTERM: %v", err)
	}
	if lines := logLines(t, h.logs[2], "hand-over before stopping"); len(lines) > 0 {
		t.Fatalf("the drained host 2 handed over as it stopped:\n%s", strings.Join(lines, "\n"))
	}
	if lines := logLines(t, h.logs[2], "member stopped"); len(lines) == 0 {
		t.Fatal("host 2's log has no \"member stopped\": the log check above would see nothing")
	}

	// SIGTERM: the host hands over and exits 0.
	h.procs[0].Process.Signal(syscall.SIGTERM)
	err = h.procs[0].Wait()
	h.procs[0] = nil
	if err != nil {
		t.Fatalf("host 0 after SIGTERM: %v", err)
	}
}
