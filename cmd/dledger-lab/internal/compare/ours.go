package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server/adminclient"
)

// ours runs `dledger server` members with one timing profile, authenticated with a group key
// as in production (as `dledger bench failover` does), and asks GET /v1/status.
type ours struct {
	row, binary, profile string
	cfg                  dledger.Config

	dir, peers, keyFile string
	http                []string
}

func newOurs(row, binary, profile string) (*ours, error) {
	cfg, err := dledger.Profile(profile)
	if err != nil {
		return nil, err
	}
	return &ours{row: row, binary: binary, profile: profile, cfg: cfg}, nil
}

func (o *ours) name() string { return o.row }

func (o *ours) setting() string {
	return fmt.Sprintf("--profile %s: heartbeat %v x %d = %v detection window", o.profile,
		o.cfg.HeartBeatInterval, o.cfg.MaxHeartBeatLeak, o.cfg.DetectionWindow())
}

func (o *ours) cycle() time.Duration { return o.cfg.HeartBeatInterval }

// bound is the failover benchmark's: 10 x (detection window + the longest vote round) + 5 s.
func (o *ours) bound() time.Duration {
	return 10*(o.cfg.DetectionWindow()+o.cfg.MaxVoteRound()) + 5*time.Second
}

func (o *ours) portsPerMember() int { return 2 } // rpc, http

func (o *ours) prepare(dir string, ports [][]int) error {
	o.dir, o.keyFile = dir, filepath.Join(dir, "group.key")
	key, err := secure.GenerateKey()
	if err != nil {
		return err
	}
	if err := secure.WriteKeyFile(o.keyFile, key); err != nil {
		return err
	}
	var parts []string
	o.http = nil
	for i, p := range ports {
		parts = append(parts, fmt.Sprintf("n%d-%s", i, loopback(p[0])))
		o.http = append(o.http, loopback(p[1]))
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("n%d", i)), 0o755); err != nil {
			return err
		}
	}
	o.peers = strings.Join(parts, ";")
	return nil
}

func (o *ours) command(i int) *exec.Cmd {
	id := fmt.Sprintf("n%d", i)
	return exec.Command(o.binary, "server", "--group", "compare", "--id", id, "--peers", o.peers,
		"--data-dir", filepath.Join(o.dir, id), "--http", o.http[i], "--key-file", o.keyFile,
		"--profile", o.profile, "--log-level", "info")
}

func (o *ours) probe(ctx context.Context, client *http.Client, i int) (view, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.http[i]+"/v1/status", nil)
	if err != nil {
		return view{}, err
	}
	body, err := do(client, req)
	if err != nil {
		return view{}, err
	}
	return parseOursStatus(body)
}

func parseOursStatus(body []byte) (view, error) {
	var st adminclient.StatusJSON
	if err := json.Unmarshal(body, &st); err != nil {
		return view{}, fmt.Errorf("/v1/status: %w", err)
	}
	if st.SelfID == "" || st.Term < 0 {
		return view{}, fmt.Errorf("/v1/status: no selfId or a negative term in %.80q", body)
	}
	return view{self: st.SelfID, leader: st.LeaderID, term: uint64(st.Term), isLeader: st.Role == "LEADER"}, nil
}

// do sends req and returns the body of a 200 answer, at most 1 MiB, read to the end so the
// connection is reused.
func do(client *http.Client, req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	io.Copy(io.Discard, resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", req.URL.Path, resp.StatusCode)
	}
	return body, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
