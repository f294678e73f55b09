package daemon

import (
	"net/http"
	"net/url"
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
		q := r.URL.Query()
		for k := range q {
			switch k {
			case "group", "role", "limit", "after":
			default:
				badRequest(w, "unknown query parameter %q (group, role, limit, after)", k)
				return
			}
		}
		limit := defaultGroupsPage
		if s := q.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxGroupsPage {
				badRequest(w, "limit %q: want 1 to %d", s, maxGroupsPage)
				return
			}
			limit = n
		}
		var role protocol.Role
		wantRole := q.Has("role")
		if wantRole {
			var ok bool
			if role, ok = protocol.ParseRole(strings.ToUpper(q.Get("role"))); !ok {
				badRequest(w, "role %q: want LEADER, FOLLOWER, CANDIDATE or UNKNOWN", q.Get("role"))
				return
			}
		}
		var afterGroup, afterID string
		if a := q.Get("after"); a != "" {
			g, id, ok := strings.Cut(a, "/")
			var err1, err2 error
			afterGroup, err1 = url.PathUnescape(g)
			afterID, err2 = url.PathUnescape(id)
			if !ok || err1 != nil || err2 != nil || afterGroup == "" {
				badRequest(w, "after %q: want the next cursor of a previous page", a)
				return
			}
		}
		out := adminclient.GroupsJSON{Groups: []adminclient.GroupJSON{}}
		for _, m := range d.sorted() { // ordered by group, then id
			g, id := m.cfg.Group, m.cfg.SelfID
			if afterGroup != "" && (g < afterGroup || g == afterGroup && id <= afterID) {
				continue
			}
			if q.Has("group") && g != q.Get("group") {
				continue
			}
			st := m.s.Status()
			if wantRole && st.Role != role {
				continue
			}
			if len(out.Groups) == limit {
				last := out.Groups[limit-1]
				out.Next = url.PathEscape(last.Group) + "/" + url.PathEscape(last.SelfID)
				break
			}
			out.Groups = append(out.Groups, adminclient.GroupJSON{Group: g, SelfID: id, Role: st.Role.String(), Term: st.Term, LeaderID: st.LeaderID})
		}
		writeJSON(w, http.StatusOK, out)
	})
}
