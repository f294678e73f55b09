package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// etcd runs etcd members (3.4 from Debian's etcd-server) and asks each for its status through
// the gRPC gateway, POST /v3/maintenance/status: about 1 ms on a kept-alive connection, where
// /metrics (etcd_server_is_leader) is a 150 kB page taking 5-7 ms and does not name the leader,
// and etcdctl is a process start per poll.
type etcd struct {
	binary string
	// heartbeat and election are the timing flags; zero: not passed, etcd's defaults apply.
	heartbeat, election time.Duration

	dir     string
	cluster string
	peer    []string
	client  []string
}

// etcd's defaults (etcd.io/docs/v3.4/tuning, and --help of 3.4).
const (
	etcdDefaultHeartbeat = 100 * time.Millisecond
	etcdDefaultElection  = 1000 * time.Millisecond
)

func (e *etcd) name() string { return "etcd" }

func (e *etcd) timings() (time.Duration, time.Duration) {
	if e.heartbeat == 0 {
		return etcdDefaultHeartbeat, etcdDefaultElection
	}
	return e.heartbeat, e.election
}

func (e *etcd) setting() string {
	hb, el := e.timings()
	flags := fmt.Sprintf("--heartbeat-interval %d --election-timeout %d", hb.Milliseconds(), el.Milliseconds())
	if e.heartbeat == 0 {
		flags = "no timing flags (defaults: heartbeat 100 ms, election timeout 1000 ms)"
	}
	return flags
}

func (e *etcd) cycle() time.Duration { hb, _ := e.timings(); return hb }

// bound: ten randomized election timeouts (each at most 2 x the election timeout) + 5 s.
func (e *etcd) bound() time.Duration { _, el := e.timings(); return 20*el + 5*time.Second }

func (e *etcd) portsPerMember() int { return 2 } // peer, client

func (e *etcd) prepare(dir string, ports [][]int) error {
	e.dir, e.peer, e.client = dir, nil, nil
	var parts []string
	for i, p := range ports {
		e.peer = append(e.peer, "http://"+loopback(p[0]))
		e.client = append(e.client, "http://"+loopback(p[1]))
		parts = append(parts, fmt.Sprintf("e%d=%s", i, e.peer[i]))
	}
	e.cluster = strings.Join(parts, ",")
	return nil
}

// command: the --initial-cluster flags only matter at the first start; a restart reads the
// membership from the data dir.
func (e *etcd) command(i int) *exec.Cmd {
	args := []string{"--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(e.dir, fmt.Sprintf("e%d", i)),
		"--listen-peer-urls", e.peer[i], "--initial-advertise-peer-urls", e.peer[i],
		"--listen-client-urls", e.client[i], "--advertise-client-urls", e.client[i],
		"--initial-cluster", e.cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "compare",
		"--logger", "zap", "--log-outputs", "stderr"}
	if e.heartbeat != 0 {
		args = append(args, "--heartbeat-interval", strconv.FormatInt(e.heartbeat.Milliseconds(), 10),
			"--election-timeout", strconv.FormatInt(e.election.Milliseconds(), 10))
	}
	return exec.Command(e.binary, args...)
}

func (e *etcd) probe(ctx context.Context, client *http.Client, i int) (view, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.client[i]+"/v3/maintenance/status",
		bytes.NewReader([]byte("{}")))
	if err != nil {
		return view{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	body, err := do(client, req)
	if err != nil {
		return view{}, err
	}
	return parseEtcdStatus(body)
}

// etcdUint is a uint64 as etcd's gRPC gateway writes it: a JSON string ("123", proto3's JSON
// mapping of 64-bit integers), or a number (etcdctl -w json); absent means 0.
type etcdUint uint64

func (u *etcdUint) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an unsigned integer: %.40s", b)
	}
	*u = etcdUint(n)
	return nil
}

// parseEtcdStatus reads a StatusResponse. The leader is a member id (0: none known, left
// out of the JSON as a zero value); the member's own id is in the header.
func parseEtcdStatus(body []byte) (view, error) {
	var st struct {
		Header struct {
			MemberID etcdUint `json:"member_id"`
		} `json:"header"`
		Leader   etcdUint `json:"leader"`
		RaftTerm etcdUint `json:"raftTerm"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return view{}, fmt.Errorf("etcd status: %w", err)
	}
	if st.Header.MemberID == 0 {
		return view{}, fmt.Errorf("etcd status without header.member_id: %.120q", body)
	}
	v := view{self: strconv.FormatUint(uint64(st.Header.MemberID), 10), term: uint64(st.RaftTerm)}
	if st.Leader != 0 {
		v.leader = strconv.FormatUint(uint64(st.Leader), 10)
	}
	v.isLeader = v.leader != "" && v.leader == v.self
	return v, nil
}
