package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/dledger-go/dledger/server"
)

func httpURL(addr, path string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/") + path
	}
	return "http://" + addr + path
}

func fetchStatus(client *http.Client, addr string) (server.StatusJSON, error) {
	var st server.StatusJSON
	resp, err := client.Get(httpURL(addr, "/v1/status"))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return st, fmt.Errorf("bad status JSON: %v", err)
	}
	return st, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Exit statuses of `dledger transfer`.
const (
	transferDone    = 0 // the transferee leads
	transferRefused = 1 // a definite no (nothing changed), or the request could not be sent
	transferUsage   = 2 // a usage error
	transferUnknown = 3 // no answer in time: the transfer may still happen
)

// runTransfer asks a member (any member: followers forward to the leader) to hand leadership
// to --to. Exit status 0 only on SUCCESS; 1 for a refusal, which stderr explains (the
// transferee abstains, is unreachable, is N entries behind, ...); 3 when the outcome is
// unknown (no answer within --timeout, or the member's own 504); 2 for a usage error.
func runTransfer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("transfer", flag.ContinueOnError)
	addr := fs.String("http", "", "admin API address of any member (required)")
	to := fs.String("to", "", "member id to hand leadership to (required)")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the answer; past it the outcome is unknown (exit 3)")
	tokenFile := fs.String("token-file", "", "file holding the member's admin bearer token (its --admin-token-file)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dledger transfer --http ADDR --to ID [--timeout D] [--token-file FILE]\n\n"+
			"Exit status: 0 the transferee leads; 1 refused, with the reason on stderr (nothing changed); 2 usage error;\n"+
			"3 outcome unknown (no answer in time: the transfer may still happen; check with dledger status).")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" || *to == "" {
		fmt.Fprintln(stderr, "dledger transfer: --http and --to are required")
		return transferUsage
	}
	var token string
	if *tokenFile != "" {
		var err error
		if token, err = readTokenFile(*tokenFile); err != nil {
			fmt.Fprintf(stderr, "dledger transfer: --token-file: %v\n", err)
			return transferUsage
		}
	}
	client := &http.Client{Timeout: *timeout}
	unknown := func(why string) int {
		fmt.Fprintf(stderr, "dledger transfer: the outcome is unknown: %s; the transfer may still happen. "+
			"Check which member leads in a few seconds: dledger status --http %s\n", why, *addr)
		return transferUnknown
	}
	started := time.Now()
	res, status, err := askTransfer(client, *addr, *to, token)
	if err != nil {
		// A timeout may have come after the request reached the member, which goes on with it;
		// any other error (refused connection, bad address) means nothing was asked.
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return unknown(fmt.Sprintf("no answer within --timeout %v", *timeout))
		}
		if status == 0 {
			fmt.Fprintf(stderr, "dledger transfer: %v (no transfer was asked)\n", err)
		} else {
			fmt.Fprintf(stderr, "dledger transfer: %v\n", err)
		}
		return transferRefused
	}
	if res.Reason == "refused" && res.LeaderID != "" {
		// A follower forwarded the request and the leader refused it with a code only the
		// leader can explain (unreachable, abstaining or behind). Nothing changed, so asking
		// the leader itself is safe, and it names the reason.
		// The second request is a transfer request too: the leader may act on it, so an error
		// after it was sent leaves the outcome unknown, not refused. Both share --timeout.
		if leaderAddr := adminAddrOf(client, *addr, res.LeaderID); leaderAddr != "" {
			if left := time.Until(started.Add(*timeout)); left > 0 {
				fmt.Fprintf(stderr, "dledger transfer: the leader %s refused the forwarded request; asking it at %s for the reason\n",
					res.LeaderID, leaderAddr)
				client.Timeout = left
				lres, lstatus, err := askTransfer(client, leaderAddr, *to, token)
				var ne net.Error
				switch {
				case err == nil:
					res, status = lres, lstatus
				case errors.As(err, &ne) && ne.Timeout():
					return unknown(fmt.Sprintf("the leader %s got the request again and did not answer within --timeout %v", res.LeaderID, *timeout))
				default:
					fmt.Fprintf(stderr, "dledger transfer: asking the leader: %v\n", err)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "transfer to %s: %s term=%d leader=%s (%.0f ms)\n", *to, res.Code, res.Term,
		dash(res.LeaderID), float64(time.Since(started).Microseconds())/1000)
	switch {
	case res.Code == "SUCCESS":
		return transferDone
	case res.Reason == "outcome-unknown" || status == http.StatusGatewayTimeout:
		return unknown("the member got no answer in time (" + res.Error + ")")
	}
	if res.Error != "" {
		fmt.Fprintf(stderr, "dledger transfer: %s\n", res.Error)
	}
	return transferRefused
}

// askTransfer posts one transfer request to the member at addr. An answer that is not a
// transfer's JSON is an error naming its HTTP status.
func askTransfer(client *http.Client, addr, to, token string) (server.TransferJSON, int, error) {
	var res server.TransferJSON
	body, _ := json.Marshal(server.TransferRequestJSON{To: to})
	req, err := http.NewRequest("POST", httpURL(addr, "/v1/transfer"), bytes.NewReader(body))
	if err != nil {
		return res, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return res, 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(raw, &res); err != nil || res.Code == "" {
		// Not an answer to the transfer (401, 400, ...): the member's message as text, not its
		// JSON, whose encoder may have escaped "<" as \u003c.
		msg := strings.TrimSpace(string(raw))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return res, resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	return res, resp.StatusCode, nil
}

// adminAddrOf is member id's admin address as the member at addr lists it (GET /v1/members),
// or "" when it does not know it.
func adminAddrOf(client *http.Client, addr, id string) string {
	resp, err := client.Get(httpURL(addr, "/v1/members"))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var members []server.MemberJSON
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&members) != nil {
		return ""
	}
	for _, m := range members {
		if m.ID == id && m.Reachable {
			return m.AdminAddr
		}
	}
	return ""
}
