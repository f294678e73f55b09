package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

// fetchStatus is one member's /v1/status.
func fetchStatus(client *http.Client, addr string) (adminclient.StatusJSON, error) {
	return fetchMemberStatus(client, addr, "", "")
}

// fetchMemberStatus is the status of member id of group on the process at addr (group "": its
// one member).
func fetchMemberStatus(client *http.Client, addr, group, id string) (adminclient.StatusJSON, error) {
	c := &adminclient.Client{Addr: addr, HTTP: client}
	if group != "" {
		c = c.Member(group, id)
	}
	return c.Status(context.Background())
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
	group := fs.String("group", "", "on a process serving many group members: transfer in this group (asking its member --id, or the first it lists)")
	id := fs.String("id", "", "with --group: the member to ask")
	tlsFlags := addClientTLSFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dledger transfer --http ADDR [--group G [--id ID]] --to ID [--timeout D] [--token-file FILE]\n"+
			"                        [--cacert FILE [--cert FILE --key FILE]]\n\n"+
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
	if *id != "" && *group == "" {
		fmt.Fprintln(stderr, "dledger transfer: --id needs --group")
		return transferUsage
	}
	client, err := tlsFlags.httpClient(*timeout)
	if err != nil {
		fmt.Fprintf(stderr, "dledger transfer: %v\n", err)
		return transferUsage
	}
	asked, err := memberOf(context.Background(), client, *addr, *group, *id)
	if err != nil {
		fmt.Fprintf(stderr, "dledger transfer: %v (no transfer was asked)\n", err)
		return transferRefused
	}
	unknown := func(why string) int {
		fmt.Fprintf(stderr, "dledger transfer: the outcome is unknown: %s; the transfer may still happen. "+
			"Check which member leads in a few seconds: dledger status --http %s\n", why, *addr)
		return transferUnknown
	}
	started := time.Now()
	member := &adminclient.Client{Addr: *addr, HTTP: client, Token: token}
	if *group != "" {
		member = member.Member(*group, asked)
	}
	res, err := member.Transfer(context.Background(), *to)
	var te *adminclient.TransferError
	if errors.As(err, &te) && te.Result.Code == "" {
		// No transfer's answer. A timeout may have come after the request reached the member,
		// which goes on with it; any other error (refused connection, bad address) means
		// nothing was asked; an answer that is not a transfer's (401, 400) is a refusal.
		switch {
		case errors.Is(err, adminclient.ErrOutcomeUnknown):
			return unknown(fmt.Sprintf("no answer within --timeout %v", *timeout))
		case errors.Is(err, adminclient.ErrNotSent):
			fmt.Fprintf(stderr, "dledger transfer: %v (no transfer was asked)\n", te.Err)
		default:
			fmt.Fprintf(stderr, "dledger transfer: %v\n", te.Err)
		}
		return transferRefused
	}
	if res.Reason == adminclient.ReasonRefused && res.LeaderID != "" {
		// A follower forwarded the request and the leader refused it with a code only the
		// leader can explain (unreachable, abstaining or behind). Nothing changed, so asking
		// the leader itself is safe, and it names the reason.
		// The second request is a transfer request too: the leader may act on it, so an error
		// after it was sent leaves the outcome unknown, not refused. Both share --timeout.
		if leaderAddr := adminAddrOf(member, res.LeaderID); leaderAddr != "" {
			if left := time.Until(started.Add(*timeout)); left > 0 {
				fmt.Fprintf(stderr, "dledger transfer: the leader %s refused the forwarded request; asking it at %s for the reason\n",
					res.LeaderID, leaderAddr)
				client.Timeout = left
				leader := &adminclient.Client{Addr: leaderAddr, HTTP: client, Token: token}
				if *group != "" {
					leader = leader.Member(*group, res.LeaderID)
				}
				lres, lerr := leader.Transfer(context.Background(), *to)
				var lte *adminclient.TransferError
				switch {
				case !errors.As(lerr, &lte) || lte.Result.Code != "": // the leader's answer
					res, err = lres, lerr
				case errors.Is(lerr, adminclient.ErrOutcomeUnknown):
					return unknown(fmt.Sprintf("the leader %s got the request again and did not answer within --timeout %v", res.LeaderID, *timeout))
				default:
					fmt.Fprintf(stderr, "dledger transfer: asking the leader: %v\n", lte.Err)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "transfer to %s: %s term=%d leader=%s (%.0f ms)\n", *to, res.Code, res.Term,
		dash(res.LeaderID), float64(time.Since(started).Microseconds())/1000)
	switch {
	case err == nil:
		return transferDone
	case errors.Is(err, adminclient.ErrOutcomeUnknown):
		return unknown("the member got no answer in time (" + res.Error + ")")
	}
	if res.Error != "" {
		fmt.Fprintf(stderr, "dledger transfer: %s\n", res.Error)
	}
	return transferRefused
}

// adminAddrOf is member id's admin address as the member asked lists it (GET /v1/members),
// or "" when it does not know it.
func adminAddrOf(member *adminclient.Client, id string) string {
	members, err := member.Members(context.Background())
	if err != nil {
		return ""
	}
	for _, m := range members {
		if m.ID == id && m.Reachable {
			return m.AdminAddr
		}
	}
	return ""
}
