package main

// dledger members lists a group's configuration and changes it while the group runs (issue 31;
// docs/protocol.md section 13), as etcdctl's member commands do: add a non-voter, promote it
// once its ledger has caught up, remove a member; and, when a quorum is lost for good, forced
// recovery. Every change goes to the leader: a member that does not lead refuses with the
// leader's id and admin address, and the command asks the leader there (at most twice: a
// leader that removes itself hands over first and names its successor).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server/adminclient"
)

const membersUsage = `usage: dledger members <list|add|promote|remove|force-recover> --http ADDR [flags]

  list           the group's configuration (epoch, voters, non-voters; the leader's view of who
                 has caught up): dledger members list --http ADDR [-o json]
  add            add a member as a non-voter (it follows the leader, votes in no quorum):
                 dledger members add --http ADDR --id n3 --addr HOST:PORT [--public-key KEY]
  promote        make a non-voter a voter, once its ledger has caught up with the quorum's:
                 dledger members promote --http ADDR --id n3 [--wait 30s]
  remove         remove a member (a leader being removed hands over first):
                 dledger members remove --http ADDR --id n2
  force-recover  when a quorum is lost for good: make the survivors the new configuration.
                 Refused if any member outside them answers. Run it on ONE survivor:
                 dledger members force-recover --http ADDR --survivors n0[,n1] --yes-i-lost-the-quorum

ADDR is any member's admin API (a member that does not lead names the leader, and the command asks
it). Changes need the admin token when the members have one (--token-file FILE); members serving
HTTPS are asked with --cacert FILE (and --cert/--key for --client-cert-auth). Replace a member:
start the new one with --join, then add, promote, remove (docs/operations.md, "Replacing a member").
Exit status: 0 done; 1 refused (nothing changed; the reason on stderr); 2 usage; 3 outcome unknown
(no answer in time: the change may still be agreed; check with dledger members list).
`

// Exit statuses of `dledger members` (those of `dledger transfer`).
const (
	membersDone    = 0
	membersRefused = 1
	membersUsage2  = 2
	membersUnknown = 3
)

// runMembers is `dledger members`.
func runMembers(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, membersUsage)
		return membersUsage2
	}
	switch args[0] {
	case "list":
		return runMembersList(args[1:], stdout, stderr)
	case "add", "promote", "remove", "force-recover":
		return runMembersChange(args[0], args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, membersUsage)
		return 0
	}
	fmt.Fprintf(stderr, "dledger members: unknown subcommand %q\n%s", args[0], membersUsage)
	return membersUsage2
}

// membersClient is the client of the member at addr (of group/id on a host of many groups).
func membersClient(addr, group, id, token string, hc *http.Client) *adminclient.Client {
	c := &adminclient.Client{Addr: addr, HTTP: hc, Token: token}
	if group != "" {
		c = c.Member(group, id)
	}
	return c
}

func runMembersList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("members list", flag.ContinueOnError)
	addr := fs.String("http", "", "admin API (or --metrics) address of any member (required)")
	group := fs.String("group", "", "on a process serving many group members: this group's member (--id, or the first listed)")
	id := fs.String("id", "", "with --group: the member to ask")
	timeout := fs.Duration("timeout", 5*time.Second, "per-request timeout")
	format := fs.String("o", "text", "output: text (a table) or json (the leader's GET /v1/membership, or the member's if no leader answers)")
	tlsFlags := addClientTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	switch {
	case *addr == "":
		fmt.Fprintln(stderr, "dledger members list: --http is required")
		return membersUsage2
	case *format != "text" && *format != "json":
		fmt.Fprintf(stderr, "dledger members list: -o %q: want text or json\n", *format)
		return membersUsage2
	case *id != "" && *group == "":
		fmt.Fprintln(stderr, "dledger members list: --id needs --group")
		return membersUsage2
	}
	hc, err := tlsFlags.httpClient(*timeout)
	if err != nil {
		fmt.Fprintf(stderr, "dledger members list: %v\n", err)
		return membersUsage2
	}
	ctx := context.Background()
	asked, err := memberOf(ctx, hc, *addr, *group, *id)
	if err != nil {
		fmt.Fprintf(stderr, "dledger members list: %v\n", err)
		return membersRefused
	}
	c := membersClient(*addr, *group, asked, "", hc)
	m, err := c.MemberList(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "dledger members list: %s: %v\n", *addr, err)
		return membersRefused
	}
	m, from := leaderMembership(ctx, c, hc, *group, m, *addr)
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(m)
		return membersDone
	}
	printMembership(stdout, m, from)
	return membersDone
}

// leaderMembership returns the leader's view of the configuration, and where it was read,
// when the member asked (m, read from addr) follows and its leader answers as leader; else
// m and addr. Who is alive and caught up only the leader knows.
func leaderMembership(ctx context.Context, c *adminclient.Client, hc *http.Client, group string, m adminclient.MembershipJSON, addr string) (adminclient.MembershipJSON, string) {
	if m.Role != "LEADER" && m.LeaderID != "" {
		if la := adminAddrOf(c, m.LeaderID); la != "" {
			if lm, err := membersClient(la, group, m.LeaderID, "", hc).MemberList(ctx); err == nil && lm.Role == "LEADER" {
				return lm, la
			}
		}
	}
	return m, addr
}

// printMembership writes the configuration as a table, with the leader's view of each member
// when m is the leader's.
func printMembership(w io.Writer, m adminclient.MembershipJSON, from string) {
	fmt.Fprintf(w, "group %s, configuration epoch %d, leader %s (read from %s at %s)\n", m.Group, m.Epoch, dash(m.LeaderID), m.SelfID, from)
	if m.Pending != nil {
		fmt.Fprintf(w, "in flight: %s %s (epoch %d)\n", m.Pending.Op, m.Pending.ID, m.Pending.Epoch)
	}
	if m.Warning != "" {
		fmt.Fprintf(w, "warning: %s\n", m.Warning)
	}
	if m.Removed {
		fmt.Fprintf(w, "%s is not a member of this configuration: it was removed\n", m.SelfID)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tADDR\tALIVE\tLEDGER(term,index)\tCAUGHT-UP")
	for _, p := range m.Members {
		alive, ledger, caught := "-", "-", "-"
		if p.Alive != nil {
			alive = yesNo(*p.Alive)
		}
		if p.LedgerKnown != nil && *p.LedgerKnown && p.LedgerEndTerm != nil && p.LedgerEndIndex != nil {
			ledger = fmt.Sprintf("(%d,%d)", *p.LedgerEndTerm, *p.LedgerEndIndex)
		} else if p.LedgerKnown != nil {
			ledger = "unknown"
		}
		if p.CaughtUp != nil {
			caught = yesNo(*p.CaughtUp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Kind, p.Addr, alive, ledger, caught)
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// membersChange is one change's settings from the command line.
type membersChange struct {
	verb, addr, group, id, token string
	target, peerAddr             string // the member to add, promote or remove, and its address (add)
	publicKey                    string // add: the new member's public key (member keys, issue 32)
	survivors                    []string
	timeout, wait                time.Duration
	hc                           *http.Client // with the TLS flags' config (clienttls.go)
}

func parseMembersChange(verb string, args []string, stderr io.Writer) (membersChange, int, bool) {
	fs := flag.NewFlagSet("members "+verb, flag.ContinueOnError)
	mc := membersChange{verb: verb}
	var tokenFile, survivors string
	var sure bool
	fs.StringVar(&mc.addr, "http", "", "admin API address of any member (required)")
	fs.StringVar(&mc.group, "group", "", "on a process serving many group members: the group (its member --member, or the first listed)")
	fs.StringVar(&mc.id, "member", "", "with --group: the member to ask")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the members' admin bearer token (their --admin-token-file)")
	fs.DurationVar(&mc.timeout, "timeout", 30*time.Second, "how long to wait for the answer; past it the outcome is unknown (exit 3)")
	tlsFlags := addClientTLSFlags(fs)
	switch verb {
	case "force-recover":
		fs.StringVar(&survivors, "survivors", "", "the surviving voters, comma-separated, the member asked included (required)")
		fs.BoolVar(&sure, "yes-i-lost-the-quorum", false, "required: say that the other voters are gone for good")
	default:
		fs.StringVar(&mc.target, "id", "", "the member to "+verb+" (required)")
	}
	if verb == "add" {
		fs.StringVar(&mc.peerAddr, "addr", "", "the new member's rpc address, HOST:PORT, as the others dial it (required)")
		fs.StringVar(&mc.publicKey, "public-key", "", "with member keys: the new member's public key (base64, as dledger keygen --member prints it); "+
			"every member trusts it once the change is stored, and forgets it when the member is removed")
	}
	if verb == "promote" {
		fs.DurationVar(&mc.wait, "wait", 0, "while the member has not caught up, ask again until this long has passed (0: ask once)")
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return mc, code, false
	}
	if survivors != "" {
		mc.survivors = strings.Split(survivors, ",")
	}
	problem := mc.problem(sure)
	if problem == "" {
		var err error
		if mc.hc, err = tlsFlags.httpClient(mc.timeout); err != nil {
			problem = err.Error()
		}
	}
	if problem == "" && tokenFile != "" {
		var err error
		if mc.token, err = readTokenFile(tokenFile); err != nil {
			problem = "--token-file: " + err.Error()
		}
	}
	if problem != "" {
		fmt.Fprintf(stderr, "dledger members %s: %s\n", verb, problem)
		return mc, membersUsage2, false
	}
	return mc, 0, true
}

// problem is what is wrong with the change's flags, or "".
func (mc membersChange) problem(sure bool) string {
	force := mc.verb == "force-recover"
	switch {
	case mc.addr == "":
		return "--http is required"
	case mc.id != "" && mc.group == "":
		return "--member needs --group"
	case !force && mc.target == "":
		return "--id is required"
	case mc.verb == "add" && mc.peerAddr == "":
		return "--addr is required (the new member's rpc address)"
	case mc.publicKey != "":
		if _, err := secure.ParsePublicKey(mc.publicKey); err != nil {
			return "--public-key: " + err.Error() + " (give the key dledger keygen --member printed after the id)"
		}
	case force && len(mc.survivors) == 0:
		return "--survivors is required"
	case force && !sure:
		return "refusing without --yes-i-lost-the-quorum: forced recovery gives up the members outside --survivors; " +
			"run it only when they are gone for good (it is refused anyway if one of them answers)"
	}
	return ""
}

// runMembersChange is add, promote, remove and force-recover.
func runMembersChange(verb string, args []string, stdout, stderr io.Writer) int {
	mc, code, ok := parseMembersChange(verb, args, stderr)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), mc.timeout)
	defer cancel()
	asked, err := memberOf(ctx, mc.hc, mc.addr, mc.group, mc.id)
	if err != nil {
		fmt.Fprintf(stderr, "dledger members %s: %v (nothing was asked)\n", verb, err)
		return membersRefused
	}
	started := time.Now()
	m, err := mc.send(ctx, stderr, mc.addr, asked)
	return mc.report(stdout, stderr, m, err, time.Since(started))
}

// send asks the member at addr, following a refusal that names the leader (at most twice),
// and, for promote --wait, asking again while the member has not caught up.
func (mc membersChange) send(ctx context.Context, stderr io.Writer, addr, asked string) (adminclient.MembershipJSON, error) {
	deadline := time.Now().Add(mc.wait)
	hops := 0
	for {
		c := membersClient(addr, mc.group, asked, mc.token, mc.hc)
		m, err := mc.call(ctx, c)
		var me *adminclient.MembershipError
		if !errors.As(err, &me) {
			return m, err
		}
		switch r := me.Result; {
		case (r.Reason == adminclient.ReasonNotLeader || r.Reason == adminclient.ReasonLeaderHandsOver) && r.LeaderAdmin != "" && hops < 2:
			hops++
			fmt.Fprintf(stderr, "dledger members %s: %s does not lead; asking the leader %s at %s\n", mc.verb, addr, r.LeaderID, r.LeaderAdmin)
			addr, asked = r.LeaderAdmin, r.LeaderID
			continue
		case r.Reason == adminclient.ReasonNotCaughtUp && time.Now().Before(deadline):
			select {
			case <-time.After(100 * time.Millisecond): // a heartbeat interval: the leader learns the ledger from its answers
				continue
			case <-ctx.Done():
			}
		}
		return m, err
	}
}

func (mc membersChange) call(ctx context.Context, c *adminclient.Client) (adminclient.MembershipJSON, error) {
	switch mc.verb {
	case "add":
		if mc.publicKey != "" {
			return c.MemberAddWithKey(ctx, mc.target, mc.peerAddr, mc.publicKey)
		}
		return c.MemberAdd(ctx, mc.target, mc.peerAddr)
	case "promote":
		return c.MemberPromote(ctx, mc.target)
	case "remove":
		return c.MemberRemove(ctx, mc.target)
	}
	return c.ForceRecover(ctx, mc.survivors)
}

// report prints the outcome and returns the exit status.
func (mc membersChange) report(stdout, stderr io.Writer, m adminclient.MembershipJSON, err error, took time.Duration) int {
	if err == nil {
		what := mc.verb + " " + mc.target
		if mc.verb == "force-recover" {
			what = "forced recovery to voters " + strings.Join(mc.survivors, ",")
		}
		fmt.Fprintf(stdout, "%s: done, configuration epoch %d (%.0f ms)\n", what, m.Epoch, float64(took.Microseconds())/1000)
		printMembership(stdout, m, "the member that made the change")
		return membersDone
	}
	var me *adminclient.MembershipError
	if errors.As(err, &me) && errors.Is(err, adminclient.ErrOutcomeUnknown) {
		fmt.Fprintf(stderr, "dledger members %s: the outcome is unknown: %v; the change may still be agreed. "+
			"Check in a few seconds: dledger members list --http %s\n", mc.verb, err, mc.addr)
		return membersUnknown
	}
	fmt.Fprintf(stderr, "dledger members %s: %v\n", mc.verb, err)
	if me != nil && me.Result.Reason == adminclient.ReasonNotLeader && me.Result.LeaderAdmin == "" {
		fmt.Fprintf(stderr, "dledger members %s: the leader is %s; ask it at its admin address (dledger status --http %s lists them)\n",
			mc.verb, dash(me.Result.LeaderID), mc.addr)
	}
	return membersRefused
}
