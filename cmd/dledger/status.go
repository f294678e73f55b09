package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

// statusReport is `dledger status -o json`: one entry per member, in the peers string's order
// (discovered) or in the order given (--http a,b,c). Keys are never renamed; new ones may be
// added.
type statusReport struct {
	// DiscoveredFrom is the one address given, whose /v1/members listed the group; absent with
	// an explicit list.
	DiscoveredFrom string         `json:"discoveredFrom,omitempty"`
	Members        []memberReport `json:"members"`
	// Unreachable counts the members whose status could not be read (exit status 1 when > 0).
	Unreachable int `json:"unreachable"`
	// Error: the group could not be listed (the member given did not answer /v1/members).
	Error string `json:"error,omitempty"`
}

// memberReport is one member in a statusReport.
type memberReport struct {
	ID        string `json:"id"`                // "" when nothing answered for it (explicit list)
	RPCAddr   string `json:"rpcAddr,omitempty"` // from the peers string
	AdminAddr string `json:"adminAddr"`         // the admin API asked; "" when unknown
	// ReadAddr is the member's read-only listener (its --metrics), asked instead when it has no
	// admin API: it serves /v1/status as well.
	ReadAddr string `json:"readAddr,omitempty"`
	// Reachable: its /v1/status answered (Status holds it).
	Reachable bool                    `json:"reachable"`
	Error     string                  `json:"error,omitempty"`
	Status    *adminclient.StatusJSON `json:"status,omitempty"`
}

// runStatus shows every member of a group. With one --http address it asks that member for
// the others (GET /v1/members: each member's admin address, learned over the members' rpc
// connections), then reads each member's /v1/status; with a list it reads exactly those.
// Exit status 0 when every member's status was read, 1 when any member is unreachable (or the
// group could not be listed), 2 on a usage error.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addrs := fs.String("http", "", "admin API address of one member (the others are found through it), or of "+
		"several, comma-separated (exactly those are shown) (required)")
	timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout")
	format := fs.String("o", "text", "output: text (a table) or json (one JSON document)")
	group := fs.String("group", "", "on processes serving many group members: show this group (through its member --id, or "+
		"the first the process lists)")
	id := fs.String("id", "", "with --group: the member asked for the others")
	tlsFlags := addClientTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	list, err := statusAddrs(*addrs, *group, *id, *format)
	if err != nil {
		fmt.Fprintf(stderr, "dledger status: %v\n", err)
		return 2
	}
	client, err := tlsFlags.httpClient(*timeout)
	if err != nil {
		fmt.Fprintf(stderr, "dledger status: %v\n", err)
		return 2
	}
	rep := collectStatus(client, list, *group, *id)
	writeStatus(stdout, stderr, rep, *format)
	if rep.Unreachable > 0 || rep.Error != "" {
		return 1
	}
	return 0
}

// statusAddrs checks runStatus's command line and returns the addresses of --http (addrs).
func statusAddrs(addrs, group, id, format string) ([]string, error) {
	if id != "" && group == "" {
		return nil, errors.New("--id needs --group")
	}
	if addrs == "" {
		return nil, errors.New("--http is required (e.g. --http 127.0.0.1:21911)")
	}
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("-o %q: want text or json", format)
	}
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	if len(list) == 0 {
		return nil, errors.New("--http holds no address")
	}
	return list, nil
}

// collectStatus reads the status of the members at list: those it lists when it holds one
// address (discover), else exactly those.
func collectStatus(client *http.Client, list []string, group, id string) statusReport {
	rep := statusReport{Members: []memberReport{}}
	if len(list) == 1 {
		rep = discover(client, list[0], group, id)
	} else {
		for _, a := range list {
			rep.Members = append(rep.Members, memberReport{AdminAddr: a})
		}
	}
	readStatuses(client, rep.Members, group)
	for _, m := range rep.Members {
		if !m.Reachable {
			rep.Unreachable++
		}
	}
	return rep
}

// writeStatus prints rep in format: one JSON document, or a table (and the listing's error on
// stderr).
func writeStatus(stdout, stderr io.Writer, rep statusReport, format string) {
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return
	}
	printStatusTable(stdout, rep)
	if rep.Error != "" {
		fmt.Fprintf(stderr, "dledger status: %s\n", rep.Error)
	}
}

// discover lists the group through one member's /v1/members (with group set: that group's
// member id at addr, or the first the process lists). The member asked keeps the address given
// (it works from here); the others get the admin address they advertise.
func discover(client *http.Client, addr, group, id string) statusReport {
	rep := statusReport{DiscoveredFrom: addr, Members: []memberReport{}}
	id, err := memberOf(context.Background(), client, addr, group, id)
	if err != nil {
		rep.Error = fmt.Sprintf("finding group %s at %s: %v", group, addr, err)
		return rep
	}
	ms, err := fetchMembers(client, addr, group, id)
	if err != nil {
		rep.Error = fmt.Sprintf("listing the group through %s: %v", addr, err)
		// Still show the member given, if it answers.
		rep.Members = append(rep.Members, memberReport{AdminAddr: addr})
		return rep
	}
	for _, m := range ms {
		r := memberReport{ID: m.ID, RPCAddr: m.RPCAddr, AdminAddr: m.AdminAddr, ReadAddr: m.ReadAddr, Error: m.Error}
		if m.Self {
			r.AdminAddr, r.ReadAddr, r.Error = addr, "", ""
		}
		rep.Members = append(rep.Members, r)
	}
	return rep
}

func fetchMembers(client *http.Client, addr, group, id string) ([]adminclient.MemberJSON, error) {
	c := &adminclient.Client{Addr: addr, HTTP: client}
	if group != "" {
		c = c.Member(group, id)
	}
	ms, err := c.Members(context.Background())
	if errors.Is(err, adminclient.ErrNoMembersRoute) {
		if page, gerr := c.Groups(context.Background(), adminclient.GroupsQuery{Limit: 1}); group == "" && gerr == nil && len(page.Groups) > 0 {
			return nil, errors.New("this process serves many group members: name one with --group (dledger groups list shows them)")
		}
		return nil, errors.New("no /v1/members (a member older than this tool: list every address with --http a,b,c)")
	}
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, errors.New("no members listed")
	}
	return ms, nil
}

// readStatuses reads every member's /v1/status in parallel, through its admin API or, for a
// member without one, its read-only listener. A member with neither address stays
// unreachable, with the error discovery gave. With group set each is that group's member at its
// address (one given without an id: the first member of group the process lists).
func readStatuses(client *http.Client, ms []memberReport, group string) {
	var wg sync.WaitGroup
	for i := range ms {
		m := &ms[i]
		addr := m.AdminAddr
		if addr == "" {
			addr = m.ReadAddr
		}
		if addr == "" {
			if m.Error == "" {
				m.Error = "admin address unknown"
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := memberOf(context.Background(), client, addr, group, m.ID)
			var st adminclient.StatusJSON
			if err == nil {
				st, err = fetchMemberStatus(client, addr, group, id)
			}
			switch {
			case err != nil:
				m.Error = err.Error()
			case m.ID != "" && st.SelfID != m.ID:
				m.Error = fmt.Sprintf("%s answers as member %q (a wrong advertised address?)", addr, st.SelfID)
			default:
				m.ID, m.Reachable, m.Error, m.Status = st.SelfID, true, "", &st
				for _, p := range st.Peers {
					if p.Self && m.RPCAddr == "" {
						m.RPCAddr = p.Addr
					}
				}
			}
		}()
	}
	wg.Wait()
}

func printStatusTable(w io.Writer, rep statusReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tTERM\tLEADER\tVOTE\tLEDGER(term,index)\tLAST-HB\tHTTP")
	for _, m := range rep.Members {
		if !m.Reachable {
			where := m.AdminAddr
			if where == "" {
				where = "rpc " + dash(m.RPCAddr)
			}
			fmt.Fprintf(tw, "%s\tUNREACHABLE\t-\t-\t-\t-\t-\t%s (%s)\n", dash(m.ID), where, m.Error)
			continue
		}
		st := m.Status
		hb := "-"
		if st.LastHeartBeatMsAgo >= 0 {
			hb = fmt.Sprintf("%dms ago", st.LastHeartBeatMsAgo)
		}
		role := st.Role
		if st.Ready != nil && !*st.Ready {
			role += "(not-ready)"
		}
		ledger := fmt.Sprintf("(%d,%d)", st.LedgerEndTerm, st.LedgerEndIndex)
		if st.Abstaining {
			// Not (-1,-1), which reads as "an empty ledger reported": nothing was reported since
			// the start, so the member grants no vote and does not campaign.
			role += "(abstaining)"
			ledger = "unreported"
		}
		where := m.AdminAddr
		if m.AdminAddr == "" && m.ReadAddr != "" {
			where = m.ReadAddr + " (read-only)"
		}
		role += selfKindNote(*st)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", st.SelfID, role, st.Term, dash(st.LeaderID),
			dash(st.VoteFor), ledger, hb, where)
	}
	tw.Flush()
	for _, m := range rep.Members {
		if m.Reachable && m.Status.ConfigWarning != "" {
			fmt.Fprintf(w, "warning: %s: %s\n", m.Status.SelfID, m.Status.ConfigWarning)
		}
	}
}

// selfKindNote marks a member that is not a voter of the configuration it holds (issue 31):
// "(non-voter)" while it follows without a vote, "" for a voter.
func selfKindNote(st adminclient.StatusJSON) string {
	for _, p := range st.Peers {
		if p.Self && p.Kind != "" && p.Kind != adminclient.KindVoter {
			return "(" + p.Kind + ")"
		}
	}
	return ""
}
