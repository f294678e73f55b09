package daemon

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/dledger-go/dledger/rpc/protocol"

	"github.com/dledger-go/dledger/server/adminclient"
)

const (
	defaultGroupsPage = 100
	maxGroupsPage     = 1000
)

// groupsHandler serves GET /v1/groups: the process's members as adminclient.GroupJSON objects, ordered by
// group then self id. Query parameters: group (only that group), role (LEADER, FOLLOWER,
// CANDIDATE or UNKNOWN: only members in that role), limit (page size, default 100, at most
// 1000) and after (the cursor a previous page returned as next, the last member's group and
// id path-escaped: members after it). A page of a host whose members change between requests neither repeats nor
// skips a member that stayed.
func (d *Daemon) groupsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, errorJSON{Error: "GET only"})
			return
		}
		gq, err := parseGroupsQuery(r.URL.Query())
		if err != nil {
			badRequest(w, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, d.groupsPage(gq))
	})
}

// groupsQuery is a GET /v1/groups request's query, checked.
type groupsQuery struct {
	group               string // with hasGroup: only this group
	hasGroup            bool
	role                protocol.Role // with hasRole: only members in this role
	hasRole             bool
	limit               int
	afterGroup, afterID string // the cursor; afterGroup "" when none
}

// parseGroupsQuery checks q: known parameters only, a limit in range, a role by name and a
// cursor a page returned.
func parseGroupsQuery(q url.Values) (groupsQuery, error) {
	gq := groupsQuery{group: q.Get("group"), hasGroup: q.Has("group"), hasRole: q.Has("role"), limit: defaultGroupsPage}
	for k := range q {
		switch k {
		case "group", "role", "limit", "after":
		default:
			return gq, fmt.Errorf("unknown query parameter %q (group, role, limit, after)", k)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxGroupsPage {
			return gq, fmt.Errorf("limit %q: want 1 to %d", s, maxGroupsPage)
		}
		gq.limit = n
	}
	if gq.hasRole {
		var ok bool
		if gq.role, ok = protocol.ParseRole(strings.ToUpper(q.Get("role"))); !ok {
			return gq, fmt.Errorf("role %q: want LEADER, FOLLOWER, CANDIDATE or UNKNOWN", q.Get("role"))
		}
	}
	if a := q.Get("after"); a != "" {
		var ok bool
		if gq.afterGroup, gq.afterID, ok = parseGroupsCursor(a); !ok {
			return gq, fmt.Errorf("after %q: want the next cursor of a previous page", a)
		}
	}
	return gq, nil
}

// parseGroupsCursor reads a cursor a page returned as next: the path-escaped group and id of
// its last member, joined by '/'.
func parseGroupsCursor(a string) (group, id string, ok bool) {
	g, i, ok := strings.Cut(a, "/")
	group, err1 := url.PathUnescape(g)
	id, err2 := url.PathUnescape(i)
	return group, id, ok && err1 == nil && err2 == nil && group != ""
}

// past says whether member id of group g comes after the cursor (every member does when there
// is none).
func (gq groupsQuery) past(g, id string) bool {
	return gq.afterGroup == "" || g > gq.afterGroup || g == gq.afterGroup && id > gq.afterID
}

// groupsPage is the page of the process's members gq asks for. It starts at the cursor's
// place in the order (the first member after it, and of the group asked for, found by binary
// search) and reads each member's
// Summary, which allocates nothing.
func (d *Daemon) groupsPage(gq groupsQuery) adminclient.GroupsJSON {
	out := adminclient.GroupsJSON{Groups: []adminclient.GroupJSON{}}
	order := d.sorted() // ordered by group, then id
	from := sort.Search(len(order), func(i int) bool {
		g := order[i].cfg.Group
		return gq.past(g, order[i].cfg.SelfID) && (!gq.hasGroup || g >= gq.group)
	})
	for _, m := range order[from:] {
		g, id := m.cfg.Group, m.cfg.SelfID
		if gq.hasGroup && g != gq.group {
			break // a group's members are together in the order, and it is past them
		}
		st := m.s.Summary()
		if gq.hasRole && st.Role != gq.role {
			continue
		}
		if len(out.Groups) == gq.limit {
			last := out.Groups[gq.limit-1]
			out.Next = url.PathEscape(last.Group) + "/" + url.PathEscape(last.SelfID)
			break
		}
		out.Groups = append(out.Groups, adminclient.GroupJSON{Group: g, SelfID: id, Role: st.Role.String(), Term: st.Term, LeaderID: st.LeaderID})
	}
	return out
}
