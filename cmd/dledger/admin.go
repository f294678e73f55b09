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
	t := &transfer{stderr: stderr, addr: *addr, to: *to, group: *group, timeout: *timeout}
	if code, ok := t.prepare(*tokenFile, *id, tlsFlags); !ok {
		return code
	}
	t.started = time.Now()
	member := t.member(t.addr, t.asked)
	res, err := member.Transfer(context.Background(), t.to)
	if code, ok := t.noAnswer(err); ok {
		return code
	}
	if res.Reason == adminclient.ReasonRefused && res.LeaderID != "" {
		a, code, done := t.askLeader(member, transferAnswer{res, err})
		if done {
			return code
		}
		res, err = a.res, a.err
	}
	return t.report(stdout, res, err)
}

// transfer is one run of `dledger transfer`: what it asks, of whom, and where it reports.
type transfer struct {
	stderr          io.Writer
	addr, group, to string
	timeout         time.Duration
	token           string
	client          *http.Client
	asked           string // the member asked, of group (its --id, or the first it lists)
	started         time.Time
}

// transferAnswer is one transfer request's answer.
type transferAnswer struct {
	res adminclient.TransferJSON
	err error
}

// prepare checks the command line and reads what it names (the token, the member to ask);
// ok false with the exit status when it fails.
func (t *transfer) prepare(tokenFile, id string, tlsFlags clientTLSFlags) (code int, ok bool) {
	if t.addr == "" || t.to == "" {
		fmt.Fprintln(t.stderr, "dledger transfer: --http and --to are required")
		return transferUsage, false
	}
	if tokenFile != "" {
		var err error
		if t.token, err = readTokenFile(tokenFile); err != nil {
			fmt.Fprintf(t.stderr, "dledger transfer: --token-file: %v\n", err)
			return transferUsage, false
		}
	}
	if id != "" && t.group == "" {
		fmt.Fprintln(t.stderr, "dledger transfer: --id needs --group")
		return transferUsage, false
	}
	client, err := tlsFlags.httpClient(t.timeout)
	if err != nil {
		fmt.Fprintf(t.stderr, "dledger transfer: %v\n", err)
		return transferUsage, false
	}
	t.client = client
	if t.asked, err = memberOf(context.Background(), client, t.addr, t.group, id); err != nil {
		fmt.Fprintf(t.stderr, "dledger transfer: %v (no transfer was asked)\n", err)
		return transferRefused, false
	}
	return 0, true
}

// member is the admin client of member id of the group asked at addr (the process's one
// member when no --group).
func (t *transfer) member(addr, id string) *adminclient.Client {
	c := &adminclient.Client{Addr: addr, HTTP: t.client, Token: t.token}
	if t.group != "" {
		c = c.Member(t.group, id)
	}
	return c
}

// unknown reports an outcome that is not known, and why.
func (t *transfer) unknown(why string) int {
	fmt.Fprintf(t.stderr, "dledger transfer: the outcome is unknown: %s; the transfer may still happen. "+
		"Check which member leads in a few seconds: dledger status --http %s\n", why, t.addr)
	return transferUnknown
}

// noAnswer reports a request that got no transfer's answer, with its exit status (ok false
// when err is nil or a transfer's answer).
func (t *transfer) noAnswer(err error) (code int, ok bool) {
	var te *adminclient.TransferError
	if !errors.As(err, &te) || te.Result.Code != "" {
		return 0, false
	}
	// No transfer's answer. A timeout may have come after the request reached the member,
	// which goes on with it; any other error (refused connection, bad address) means
	// nothing was asked; an answer that is not a transfer's (401, 400) is a refusal.
	switch {
	case errors.Is(err, adminclient.ErrOutcomeUnknown):
		return t.unknown(fmt.Sprintf("no answer within --timeout %v", t.timeout)), true
	case errors.Is(err, adminclient.ErrNotSent):
		fmt.Fprintf(t.stderr, "dledger transfer: %v (no transfer was asked)\n", te.Err)
	default:
		fmt.Fprintf(t.stderr, "dledger transfer: %v\n", te.Err)
	}
	return transferRefused, true
}

// askLeader follows a refusal the member asked forwarded from its leader (prev): a follower
// forwarded the request and the leader refused it with a code only the leader can explain
// (unreachable, abstaining or behind). Nothing changed, so asking the leader itself is safe,
// and it names the reason. It returns the leader's answer, or prev when the leader's address
// is not known, no time is left or the leader gave no answer; done with the exit status when
// that leaves the outcome unknown.
func (t *transfer) askLeader(member *adminclient.Client, prev transferAnswer) (a transferAnswer, code int, done bool) {
	// The second request is a transfer request too: the leader may act on it, so an error
	// after it was sent leaves the outcome unknown, not refused. Both share --timeout.
	leaderID := prev.res.LeaderID
	leaderAddr := adminAddrOf(member, leaderID)
	if leaderAddr == "" {
		return prev, 0, false
	}
	left := time.Until(t.started.Add(t.timeout))
	if left <= 0 {
		return prev, 0, false
	}
	fmt.Fprintf(t.stderr, "dledger transfer: the leader %s refused the forwarded request; asking it at %s for the reason\n",
		leaderID, leaderAddr)
	t.client.Timeout = left
	lres, lerr := t.member(leaderAddr, leaderID).Transfer(context.Background(), t.to)
	var lte *adminclient.TransferError
	switch {
	case !errors.As(lerr, &lte) || lte.Result.Code != "": // the leader's answer
		return transferAnswer{lres, lerr}, 0, false
	case errors.Is(lerr, adminclient.ErrOutcomeUnknown):
		return prev, t.unknown(fmt.Sprintf("the leader %s got the request again and did not answer within --timeout %v", leaderID, t.timeout)), true
	default:
		fmt.Fprintf(t.stderr, "dledger transfer: asking the leader: %v\n", lte.Err)
		return prev, 0, false
	}
}

// report prints the transfer's answer and returns the exit status it means.
func (t *transfer) report(stdout io.Writer, res adminclient.TransferJSON, err error) int {
	fmt.Fprintf(stdout, "transfer to %s: %s term=%d leader=%s (%.0f ms)\n", t.to, res.Code, res.Term,
		dash(res.LeaderID), float64(time.Since(t.started).Microseconds())/1000)
	switch {
	case err == nil:
		return transferDone
	case errors.Is(err, adminclient.ErrOutcomeUnknown):
		return t.unknown("the member got no answer in time (" + res.Error + ")")
	}
	if res.Error != "" {
		fmt.Fprintf(t.stderr, "dledger transfer: %s\n", res.Error)
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
