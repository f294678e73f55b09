package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/child"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server/adminclient"
)

// HostLayout says what a set of host processes serves: Hosts processes, each a member of every
// one of Groups groups (member n<j> of every group on host j, as issue 29's benchmark puts it),
// each started as `dledger server --config FILE` with DLedger's proxy list (configs:).
type HostLayout struct {
	Binary   string // the dledger executable
	Hosts    int    // processes, and members per group
	Groups   int    // groups, named by GroupName
	Profile  string // the members' timing profile
	LogLevel string // info at least: the benchmark reads the elector's events from the logs
	// Settings are more top-level keys of every host's config file (a flag's name: value),
	// after the ones the layout writes itself (listen, data-dir, key-file, http, profile,
	// log-level); a test's shorter timings go here.
	Settings map[string]string
	// Configs, if set, replaces the member list of host j: the configs: entries it serves
	// (the proxy scenarios: three members of one group on one host, preferred leaders).
	Configs func(j int, hosts []*HostProc) []ConfigEntry
}

// ConfigEntry is one configs: entry: DLedger's proxy config keys.
type ConfigEntry struct {
	Group, SelfID, Peers string
	PreferredLeaderIDs   string // ';'-separated, "" none
}

// GroupName is the name of group i of a layout: g0, g1, ...
func GroupName(i int) string { return "g" + strconv.Itoa(i) }

// MemberID is the id of host j's member in every group of the standard layout.
func MemberID(j int) string { return "n" + strconv.Itoa(j) }

// HostProc is one host process slot. A slot keeps its ports, config and data dir across
// restarts, like a machine that reboots.
type HostProc struct {
	Index      int
	RPCAddr    string
	HTTPAddr   string
	DataDir    string
	ConfigPath string
	child.Proc
	paused bool
}

// Hosts owns the host processes of one layout: every start goes through it and Shutdown kills
// them all (package child: their own process group, SIGKILL from the kernel if this process
// dies first), so nothing outlives a benchmark or a test.
type Hosts struct {
	Layout HostLayout
	Dir    string
	Procs  []*HostProc
	// Peers is the peers string of every group of the standard layout.
	Peers string

	mu     sync.Mutex
	closed bool
	client *http.Client
}

// NewHosts assigns free loopback ports, writes a group key and each host's config file under
// dir, and makes the data dirs. Nothing is started.
func NewHosts(dir string, l HostLayout) (*Hosts, error) {
	if l.Hosts < 1 || l.Groups < 0 {
		return nil, fmt.Errorf("hosts: want at least one host (got %d) and no negative group count", l.Hosts)
	}
	ports, err := FreePorts(2 * l.Hosts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Hosts authenticate each other as in production, so every measured reconnection
	// includes its handshake.
	keyFile := filepath.Join(dir, "group.key")
	key, err := secure.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := secure.WriteKeyFile(keyFile, key); err != nil {
		return nil, err
	}
	h := &Hosts{Layout: l, Dir: dir, client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}}
	var parts []string
	for j := 0; j < l.Hosts; j++ {
		name := fmt.Sprintf("host%d", j)
		p := &HostProc{Index: j,
			RPCAddr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*j])),
			HTTPAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*j+1])),
			DataDir:    filepath.Join(dir, name),
			ConfigPath: filepath.Join(dir, name+".yaml"),
			Proc:       child.Proc{LogPath: filepath.Join(dir, name+".log")},
		}
		if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
			return nil, err
		}
		h.Procs = append(h.Procs, p)
		parts = append(parts, MemberID(j)+"-"+p.RPCAddr)
	}
	h.Peers = strings.Join(parts, ";")
	for _, p := range h.Procs {
		settings := []string{"listen", p.RPCAddr, "data-dir", p.DataDir, "key-file", keyFile, "http", p.HTTPAddr,
			"profile", l.Profile, "log-level", l.LogLevel}
		for k, v := range l.Settings {
			settings = append(settings, k, v)
		}
		if err := os.WriteFile(p.ConfigPath, []byte(RenderHostConfig(settings, h.entries(p.Index))), 0o644); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// entries is host j's configs: list.
func (h *Hosts) entries(j int) []ConfigEntry {
	if h.Layout.Configs != nil {
		return h.Layout.Configs(j, h.Procs)
	}
	out := make([]ConfigEntry, h.Layout.Groups)
	for g := range out {
		out[g] = ConfigEntry{Group: GroupName(g), SelfID: MemberID(j), Peers: h.Peers}
	}
	return out
}

// RenderHostConfig is a host's config file: the settings (key, value, key, value...; in that
// order) and the configs: list in DLedger's key names, one flow mapping per line (a file of
// 10,000 groups stays under a megabyte). Values are quoted as YAML double-quoted strings.
func RenderHostConfig(settings []string, entries []ConfigEntry) string {
	var b strings.Builder
	for i := 0; i+1 < len(settings); i += 2 {
		fmt.Fprintf(&b, "%s: %s\n", settings[i], strconv.Quote(settings[i+1]))
	}
	b.WriteString("configs:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  - {group: %s, selfId: %s, peers: %s", strconv.Quote(e.Group), strconv.Quote(e.SelfID), strconv.Quote(e.Peers))
		if e.PreferredLeaderIDs != "" {
			fmt.Fprintf(&b, ", preferredLeaderIds: %s", strconv.Quote(e.PreferredLeaderIDs))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// Start runs host j. Its output is appended to its log after a marker line, so one file tells
// the story of every incarnation.
func (h *Hosts) Start(j int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("hosts are shutting down")
	}
	p := h.Procs[j]
	marker := fmt.Sprintf("=== bench: start host%d at %s", j, time.Now().Format(time.RFC3339Nano))
	if err := p.Start(exec.Command(h.Layout.Binary, "server", "--config", p.ConfigPath), marker); err != nil {
		return fmt.Errorf("start host%d: %w", j, err)
	}
	p.paused = false
	return nil
}

// StartAll starts every host, back to back, so a cold start is as simultaneous as exec allows.
func (h *Hosts) StartAll() error {
	for j := range h.Procs {
		if err := h.Start(j); err != nil {
			return err
		}
	}
	return nil
}

// Kill sends SIGKILL to host j (a crash: no hand-over, no clean close) and reaps it.
func (h *Hosts) Kill(j int) error {
	h.mu.Lock()
	p := h.Procs[j]
	err := p.Kill()
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill host%d: %w", j, err)
	}
	<-p.Done
	return nil
}

// Pause stops host j with SIGSTOP (its sockets stay open); Resume continues it.
func (h *Hosts) Pause(j int) error  { return h.signalPause(j, true) }
func (h *Hosts) Resume(j int) error { return h.signalPause(j, false) }

func (h *Hosts) signalPause(j int, stop bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.Procs[j]
	if !p.Running() {
		return fmt.Errorf("host%d is not running", j)
	}
	if err := pauseProcess(p.Cmd.Process, stop); err != nil {
		return fmt.Errorf("host%d: %w", j, err)
	}
	p.paused = stop
	return nil
}

// Terminate stops host j with SIGTERM and waits until it exits; after timeout it kills it.
func (h *Hosts) Terminate(j int, timeout time.Duration) error {
	h.mu.Lock()
	p := h.Procs[j]
	if !p.Running() {
		h.mu.Unlock()
		return fmt.Errorf("host%d is not running", j)
	}
	p.Expected = true
	err := p.Cmd.Process.Signal(syscall.SIGTERM)
	h.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-p.Done:
		return nil
	case <-time.After(timeout):
		return h.Kill(j)
	}
}

// Shutdown kills every running host, waits until each is reaped, and refuses later starts.
// Safe to call repeatedly and from any goroutine.
func (h *Hosts) Shutdown() {
	h.mu.Lock()
	h.closed = true
	var waits []chan struct{}
	for _, p := range h.Procs {
		if p.Kill() == nil { // SIGKILL also ends a SIGSTOPped process
			waits = append(waits, p.Done)
		}
	}
	h.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

// PID is host j's process id, or 0 if it is not running.
func (h *Hosts) PID(j int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Procs[j].Pid()
}

// Running reports whether host j is running and not paused by us.
func (h *Hosts) Running(j int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Procs[j].Running() && !h.Procs[j].paused
}

// Live lists the hosts that are running and not paused.
func (h *Hosts) Live() []int {
	var out []int
	for j := range h.Procs {
		if h.Running(j) {
			out = append(out, j)
		}
	}
	return out
}

// UnexpectedExit reports a host that ended although nobody killed it: a crash of the host
// process is a finding, and measuring on without it would be wrong.
func (h *Hosts) UnexpectedExit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	for _, p := range h.Procs {
		if why := p.Unexpected(); why != "" {
			return fmt.Errorf("host%d %s", p.Index, why)
		}
	}
	return nil
}

// groupsPage is the page size of the benchmark's GET /v1/groups: the route's maximum.
const groupsPage = 1000

// Groups lists every group member host j serves, from its admin API (GET /v1/groups, page
// after page).
func (h *Hosts) Groups(ctx context.Context, j int) ([]adminclient.GroupJSON, error) {
	var out []adminclient.GroupJSON
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(groupsPage)}}
		if after != "" {
			q.Set("after", after)
		}
		var page adminclient.GroupsJSON
		if err := h.getJSON(ctx, j, "/v1/groups?"+q.Encode(), &page); err != nil {
			return nil, err
		}
		out = append(out, page.Groups...)
		if page.Next == "" {
			return out, nil
		}
		if page.Next == after {
			return nil, fmt.Errorf("host%d: /v1/groups returned the same cursor %q twice", j, after)
		}
		after = page.Next
	}
}

// Snapshot is every live host's GET /v1/groups, taken one host after the other: host j's
// members, or nil for a host that is down or paused.
func (h *Hosts) Snapshot(ctx context.Context) (Snapshot, error) {
	s := make(Snapshot, len(h.Procs))
	for _, j := range h.Live() {
		gs, err := h.Groups(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("host%d: GET /v1/groups: %w", j, err)
		}
		s[j] = gs
	}
	return s, nil
}

// Admin sends an admin request to host j (PUT, DELETE, POST) and returns the status code and
// body.
func (h *Hosts) Admin(ctx context.Context, j int, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+h.Procs[j].HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = copyLimited(&b, resp.Body, 1<<20)
	return resp.StatusCode, b.String(), err
}
