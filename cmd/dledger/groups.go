package main

// dledger groups lists, adds and removes the group members of a `dledger server` process
// through its admin API (GET /v1/groups, PUT and DELETE /v1/groups/{group}/{id}), and the
// --group flag of status, watch and transfer names one member of such a process.

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

	"github.com/dledger-go/dledger/server/adminclient"
)

const groupsUsage = `usage: dledger groups <list|add|remove|drain|undrain> --http ADDR [flags]

  list    the process's group members: dledger groups list --http ADDR [--group G] [--role LEADER] [-o json]
  add     add a member at run time: dledger groups add --http ADDR --group G --id ID --peers "n0-h:p;..." [--preferred-leader-ids ID] [--join]
  remove  remove a member (a leader hands over first): dledger groups remove --http ADDR --group G --id ID
  drain   every group the process leads hands over (before a restart): dledger groups drain --http ADDR
  undrain the process may lead again (after maintenance without a restart): dledger groups undrain --http ADDR

add, remove, drain and undrain need the admin token when the process has one (--token-file FILE). A member added
at run time is not written anywhere but its data dir: add it to the process's config file too, or
it is gone after a restart (and one removed comes back unless removed from the file).
`

// runGroups is `dledger groups`. Exit status 0 done, 1 refused or unreachable, 2 usage.
func runGroups(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupsUsage)
		return 2
	}
	switch args[0] {
	case "list":
		return runGroupsList(args[1:], stdout, stderr)
	case "add", "remove":
		return runGroupsChange(args[0], args[1:], stdout, stderr)
	case "drain", "undrain":
		return runGroupsDrain(args[0], args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, groupsUsage)
		return 0
	}
	fmt.Fprintf(stderr, "dledger groups: unknown subcommand %q\n%s", args[0], groupsUsage)
	return 2
}

func runGroupsList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("groups list", flag.ContinueOnError)
	addr := fs.String("http", "", "admin API (or --metrics) address of the process (required)")
	group := fs.String("group", "", "only this group's members")
	role := fs.String("role", "", "only members in this role (LEADER, FOLLOWER, CANDIDATE)")
	timeout := fs.Duration("timeout", 5*time.Second, "per-request timeout")
	format := fs.String("o", "text", "output: text (a table) or json (one JSON document)")
	tlsFlags := addClientTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "dledger groups list: --http is required")
		return 2
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "dledger groups list: -o %q: want text or json\n", *format)
		return 2
	}
	client, err := tlsFlags.httpClient(*timeout)
	if err != nil {
		fmt.Fprintf(stderr, "dledger groups list: %v\n", err)
		return 2
	}
	c := &adminclient.Client{Addr: *addr, HTTP: client}
	all, err := c.AllGroups(context.Background(), adminclient.GroupsQuery{Group: *group, Role: strings.ToUpper(*role), Limit: 1000})
	if err != nil {
		fmt.Fprintf(stderr, "dledger groups list: %s: %v\n", *addr, err)
		return 1
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(adminclient.GroupsJSON{Groups: append([]adminclient.GroupJSON{}, all...)})
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tID\tROLE\tTERM\tLEADER")
	for _, g := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", g.Group, g.SelfID, g.Role, g.Term, dash(g.LeaderID))
	}
	tw.Flush()
	return 0
}

func runGroupsChange(verb string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("groups "+verb, flag.ContinueOnError)
	addr := fs.String("http", "", "admin API address of the process (required)")
	group := fs.String("group", "", "the member's group (required)")
	id := fs.String("id", "", "the member's id (required)")
	tokenFile := fs.String("token-file", "", "file holding the process's admin bearer token (its --admin-token-file)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the answer (a leader's removal hands over first)")
	tlsFlags := addClientTLSFlags(fs)
	var peers, preferred *string
	join := new(bool)
	if verb == "add" {
		peers = fs.String("peers", "", `the group's members as "n0-host:port;n1-host:port;..." (required); this member's entry must be the process's rpc address`)
		preferred = fs.String("preferred-leader-ids", "", "the group's preferred leaders, ';'-separated")
		join = fs.Bool("join", false, "the member joins a running group (as dledger server --join): --peers names it and the members it can reach; "+
			"the group's leader then adds it with dledger members add")
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" || *group == "" || *id == "" || (peers != nil && *peers == "") {
		req := "--http, --group and --id are"
		if peers != nil {
			req = "--http, --group, --id and --peers are"
		}
		fmt.Fprintf(stderr, "dledger groups %s: %s required\n", verb, req)
		return 2
	}
	c, ok := groupsAdminClient(verb, *addr, *tokenFile, tlsFlags, *timeout, stderr)
	if !ok {
		return 2
	}
	var g adminclient.GroupJSON
	var err error
	if verb == "add" {
		g, err = c.AddMember(context.Background(), *group, *id, adminclient.MemberEntryJSON{Peers: *peers, PreferredLeaderIDs: *preferred, Join: *join})
	} else {
		g, err = c.RemoveMember(context.Background(), *group, *id)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dledger groups %s: %s: %v\n", verb, *addr, err)
		return 1
	}
	done := map[string]string{"add": "added", "remove": "removed"}[verb]
	fmt.Fprintf(stdout, "%s member %s of group %s: role=%s term=%d leader=%s\n", done, g.SelfID, g.Group, g.Role, g.Term, dash(g.LeaderID))
	return 0
}

func runGroupsDrain(verb string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("groups "+verb, flag.ContinueOnError)
	addr := fs.String("http", "", "admin API address of the process (required)")
	tokenFile := fs.String("token-file", "", "file holding the process's admin bearer token (its --admin-token-file)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for every hand-over")
	tlsFlags := addClientTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *addr == "" {
		fmt.Fprintf(stderr, "dledger groups %s: --http is required\n", verb)
		return 2
	}
	c, ok := groupsAdminClient(verb, *addr, *tokenFile, tlsFlags, *timeout, stderr)
	if !ok {
		return 2
	}
	call, done := c.Drain, "drained %s: it leads no group\n"
	if verb == "undrain" {
		call, done = c.Undrain, "undrained %s: it may lead again\n"
	}
	if err := call(context.Background()); err != nil {
		fmt.Fprintf(stderr, "dledger groups %s: %s: %v\n", verb, *addr, err)
		return 1
	}
	fmt.Fprintf(stdout, done, *addr)
	return 0
}

// memberOf is the member of group a --group flag names at addr: id if given, else the first
// member of group the process lists.
func memberOf(ctx context.Context, client *http.Client, addr, group, id string) (string, error) {
	if group == "" || id != "" {
		return id, nil
	}
	c := &adminclient.Client{Addr: addr, HTTP: client}
	page, err := c.Groups(ctx, adminclient.GroupsQuery{Group: group, Limit: 1})
	var he *adminclient.HTTPError
	switch {
	case errors.As(err, &he) && he.Status == http.StatusNotFound:
		return "", fmt.Errorf("%s has no GET /v1/groups (a process older than this tool)", addr)
	case err != nil:
		return "", err
	case len(page.Groups) == 0:
		return "", fmt.Errorf("%s serves no member of group %q", addr, group)
	}
	return page.Groups[0].SelfID, nil
}

// groupsAdminClient is the admin client of the process at addr that dledger groups verb asks:
// with the token of tokenFile (if any) and the TLS flags' client; false (a usage error,
// reported) when either cannot be read.
func groupsAdminClient(verb, addr, tokenFile string, tlsFlags clientTLSFlags, timeout time.Duration, stderr io.Writer) (*adminclient.Client, bool) {
	var token string
	if tokenFile != "" {
		var err error
		if token, err = readTokenFile(tokenFile); err != nil {
			fmt.Fprintf(stderr, "dledger groups %s: --token-file: %v\n", verb, err)
			return nil, false
		}
	}
	client, err := tlsFlags.httpClient(timeout)
	if err != nil {
		fmt.Fprintf(stderr, "dledger groups %s: %v\n", verb, err)
		return nil, false
	}
	return &adminclient.Client{Addr: addr, HTTP: client, Token: token}, true
}
