package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

// runTransfer asks a member (any member: followers forward to the leader) to hand leadership
// to --to. Exit status 0 only on SUCCESS.
func runTransfer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("transfer", flag.ContinueOnError)
	addr := fs.String("http", "", "admin API address of any member (required)")
	to := fs.String("to", "", "member id to hand leadership to (required)")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the answer")
	tokenFile := fs.String("token-file", "", "file holding the member's admin bearer token (its --admin-token-file)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" || *to == "" {
		fmt.Fprintln(stderr, "dledger transfer: --http and --to are required")
		return 2
	}
	var token string
	if *tokenFile != "" {
		var err error
		if token, err = readTokenFile(*tokenFile); err != nil {
			fmt.Fprintf(stderr, "dledger transfer: --token-file: %v\n", err)
			return 2
		}
	}
	body, _ := json.Marshal(server.TransferRequestJSON{To: *to})
	client := &http.Client{Timeout: *timeout}
	req, err := http.NewRequest("POST", httpURL(*addr, "/v1/transfer"), bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "dledger transfer: %v\n", err)
		return 2
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	started := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "dledger transfer: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	var res server.TransferJSON
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(raw, &res); err != nil || res.Code == "" {
		// Not an answer to the transfer (401, 400, ...): print the member's message as text, not
		// its JSON, whose encoder may have escaped "<" as \u003c.
		msg := strings.TrimSpace(string(raw))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		fmt.Fprintf(stderr, "dledger transfer: HTTP %d: %s\n", resp.StatusCode, msg)
		return 1
	}
	fmt.Fprintf(stdout, "transfer to %s: %s term=%d leader=%s (%.0f ms)\n", *to, res.Code, res.Term,
		dash(res.LeaderID), float64(time.Since(started).Microseconds())/1000)
	if res.Code != "SUCCESS" {
		return 1
	}
	return 0
}
