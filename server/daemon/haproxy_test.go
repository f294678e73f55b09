package daemon

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server"
)

// rawCheck sends one health check as HAProxy does (HTTP/1.0, no Host header) and returns the
// status code.
func rawCheck(t *testing.T, addr, method, path string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.0\r\n\r\n", method, path)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The shipped HAProxy snippet's checks, sent exactly as HAProxy sends them to a live group:
// the leader backend finds exactly the leader, the followers backend exactly the followers.
// Before, OPTIONS got 405 and HAProxy would have marked every member down.
func TestHAProxySnippetChecksFindTheRightMembers(t *testing.T) {
	cfg, err := os.ReadFile("../../scripts/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	checks := regexp.MustCompile(`(?m)^\s*option httpchk (\S+) (\S+)\n\s*http-check expect status (\d+)`).FindAllStringSubmatch(string(cfg), -1)
	if len(checks) != 2 {
		t.Fatalf("want the leader and followers checks in scripts/haproxy.cfg, found %d", len(checks))
	}
	g := startGroupWith(t, 3, calmTimings())
	leader, _ := g.awaitAllFollow(electionLimit)
	for _, c := range checks {
		method, path := c[1], c[2]
		want, _ := strconv.Atoi(c[3])
		var up []string
		for i, s := range g.servers {
			if rawCheck(t, s.HTTPAddr(), method, path) == want {
				up = append(up, fmt.Sprintf("n%d", i))
			}
		}
		switch path {
		case "/v1/leader":
			if len(up) != 1 || up[0] != leader {
				t.Errorf("%s %s passes on %v, want only the leader %s", method, path, up, leader)
			}
		case "/v1/follower":
			if len(up) != 2 || up[0] == leader || up[1] == leader {
				t.Errorf("%s %s passes on %v, want the two followers (leader %s)", method, path, up, leader)
			}
		default:
			t.Errorf("unexpected check path %s in the snippet", path)
		}
	}
	// Every health route answers GET, HEAD and OPTIONS alike; liveness and readiness pass on
	// every member of a settled group.
	for i, s := range g.servers {
		id := fmt.Sprintf("n%d", i)
		for path, want := range map[string]int{"/healthz": 200, "/readyz": 200,
			"/v1/leader":   map[bool]int{true: 200, false: 503}[id == leader],
			"/v1/follower": map[bool]int{true: 503, false: 200}[id == leader]} {
			for _, method := range []string{"GET", "HEAD", "OPTIONS"} {
				if got := rawCheck(t, s.HTTPAddr(), method, path); got != want {
					t.Errorf("%s: %s %s = %d, want %d", id, method, path, got, want)
				}
			}
		}
	}
}

// A candidate is neither ready nor a follower: before any election a lone member of a
// three-member group answers 503 to /readyz and /v1/follower, and 200 to /healthz.
func TestHealthRoutesOnACandidate(t *testing.T) {
	ports := freePorts(t, 3)
	c := server.Config{Group: "g", SelfID: "n0", Peers: peersString(ports), DataDir: t.TempDir(),
		Ledger: server.LedgerNone, Election: calmTimings(), Insecure: true}
	s := mustMember(t, c, Config{HTTPAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/readyz": 503, "/v1/follower": 503, "/v1/leader": 503, "/healthz": 200} {
		for _, method := range []string{"GET", "HEAD", "OPTIONS"} {
			if got := rawCheck(t, s.HTTPAddr(), method, path); got != want {
				t.Errorf("candidate: %s %s = %d, want %d", method, path, got, want)
			}
		}
	}
}
