package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/adminclient"
)

// newTestHost starts a host on 127.0.0.1:port, insecure, with a daemon (its admin API on a
// port of its own, a token, and the host to add members to), stopped at cleanup.
func newTestHost(t testing.TB, port int, dir string) (*server.Host, *Daemon) {
	t.Helper()
	d, err := New(Config{HTTPAddr: "127.0.0.1:0", AdminToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.NewHost(server.HostConfig{Listen: fmt.Sprintf("127.0.0.1:%d", port), DataDir: dir, Insecure: true},
		server.WithAttacher(d.Attacher()))
	if err != nil {
		t.Fatal(err)
	}
	d.SetHost(h, func(m server.HostMember) (server.Config, []server.Option, error) {
		return m.Config(server.Config{Election: fastTimings(), Ledger: server.LedgerNone}), nil, nil
	})
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	d.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Stop(ctx)
		d.Stop(ctx)
	})
	return h, d
}

// addStarted adds member self of group with peers to h, reports an empty ledger and starts it.
func addStarted(t *testing.T, h *server.Host, group, self, peers string) *server.Server {
	t.Helper()
	return addStartedWith(t, h, group, self, peers, fastTimings())
}

func addStartedWith(t *testing.T, h *server.Host, group, self, peers string, timings dledger.Config) *server.Server {
	t.Helper()
	s, err := h.AddGroup(server.Config{Group: group, SelfID: self, Peers: peers, Election: timings})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// groupView is StableLeader's view of members.
func groupView(members []*server.Server, down func(*server.Server) bool) []dledgertest.Member {
	var v []dledgertest.Member
	for _, s := range members {
		st := s.Status()
		v = append(v, dledgertest.Member{ID: st.SelfID, Up: !down(s), Leading: st.Role == protocol.LEADER,
			LeaderID: st.LeaderID, Term: st.Term})
	}
	return v
}

// TestHostGroupsEndpoint: GET /v1/groups lists the host's members ordered by group and id, in
// pages whose cursors join up, filtered by group and by role; bad parameters are a 400.
func TestHostGroupsEndpoint(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(t, port, t.TempDir())
	// Four one-member groups (names with a '/' and a '%' too) and a three-member group whose
	// members all live here.
	var want []string
	for _, g := range []string{"a", "b/x", "c%", "d"} {
		addStarted(t, h, g, "n0", "n0-"+addr)
		want = append(want, g+" n0")
	}
	trio := fmt.Sprintf("n0-%s;n1-%s;n2-%s", addr, addr, addr)
	var members []*server.Server
	for i := range 3 {
		members = append(members, addStartedWith(t, h, "e", fmt.Sprintf("n%d", i), trio, calmTimings())) // read after the election
	}
	want = []string{want[0], want[1], want[2], want[3], "e n0", "e n1", "e n2"}
	sort.Strings(want)
	var leader string
	var term int64
	dledgertest.Eventually(t, electionLimit, "all of group e follow one leader", func() bool {
		var ok bool
		leader, term, ok = dledgertest.StableLeader(groupView(members, func(*server.Server) bool { return false }), 3)
		for _, m := range members {
			st := m.Status()
			ok = ok && st.LeaderID == leader && st.Term == term
		}
		return ok
	})
	dledgertest.Eventually(t, electionLimit, "the one-member groups lead", func() bool {
		for _, g := range []string{"a", "b/x", "c%", "d"} {
			if h.Member(g, "n0").Status().Role != protocol.LEADER {
				return false
			}
		}
		return true
	})
	get := func(query string) (int, adminclient.GroupsJSON) {
		t.Helper()
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/groups"+query, nil))
		var out adminclient.GroupsJSON
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, out
	}
	var got []string
	pages := 0
	for cursor := ""; ; pages++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&after=" + url.QueryEscape(cursor)
		}
		code, page := get(q)
		if code != http.StatusOK || len(page.Groups) > 2 {
			t.Fatalf("%s: %d %+v", q, code, page)
		}
		for _, g := range page.Groups {
			got = append(got, g.Group+" "+g.SelfID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("paged listing %v in %d pages, want %v in 4", got, pages+1, want)
	}
	code, page := get("?group=e")
	if code != http.StatusOK || len(page.Groups) != 3 {
		t.Fatalf("group=e: %d %+v", code, page)
	}
	for _, g := range page.Groups {
		if g.Term != term || g.LeaderID != leader || (g.SelfID == leader) != (g.Role == "LEADER") {
			t.Fatalf("group e: %+v, want leader %s at %d", g, leader, term)
		}
	}
	code, page = get("?role=leader")
	if code != http.StatusOK || len(page.Groups) != 5 {
		t.Fatalf("role=leader: %d %+v, want the 4 one-member groups and e's leader", code, page)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?role=boss", "?after=nocursor", "?grp=e"} {
		if code, _ := get(q); code != http.StatusBadRequest {
			t.Fatalf("%s: %d, want 400", q, code)
		}
	}
}

// The admin API adds a member at run time (PUT, a configs: entry as its body, with the token),
// serves its routes under /v1/groups/{group}/{id}/ (and at the single-member paths while it is
// the only one), and removes it (DELETE); bad entries, a second add and unknown members are
// refused with their codes, and the other members go on.
func TestHostAdminAddsAndRemovesMembers(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(t, port, t.TempDir())
	base := "http://" + d.HTTPAddr()
	do := func(method, path, body, token string) (int, string) {
		t.Helper()
		return sendWithToken(t, method, base+path, body, token)
	}
	entry := func(id string) string {
		return fmt.Sprintf(`{"peers":"%s-%s","preferredLeaderIds":"%s"}`, id, addr, id)
	}
	if code, _ := do("PUT", "/v1/groups/a/n0", entry("n0"), ""); code != http.StatusUnauthorized {
		t.Fatalf("PUT without the token: %d", code)
	}
	for body, want := range map[string]int{
		`{"peers":"n0-` + addr + `","selfId":"n1"}`: http.StatusBadRequest, // the path names n0
		`{"peers":"n1-` + addr + `"}`:               http.StatusBadRequest, // n0 is no peer
		`{"peers":"n0-` + addr + `","extra":1}`:     http.StatusBadRequest, // unknown key
		`not json`:                                  http.StatusBadRequest,
	} {
		if code, msg := do("PUT", "/v1/groups/a/n0", body, testToken); code != want {
			t.Errorf("PUT %s: %d %s, want %d", body, code, msg, want)
		}
	}
	if h.Member("a", "n0") != nil {
		t.Fatal("a refused PUT added the member")
	}
	if code, msg := do("PUT", "/v1/groups/a/n0", entry("n0"), testToken); code != http.StatusCreated {
		t.Fatalf("PUT a/n0: %d %s", code, msg)
	}
	if code, _ := do("PUT", "/v1/groups/a/n0", entry("n0"), testToken); code != http.StatusConflict {
		t.Fatalf("second PUT a/n0: %d, want 409", code)
	}
	awaitRole(t, h.Member("a", "n0"), protocol.LEADER)
	// One member: the single-member routes answer for it, and its own routes too.
	for _, path := range []string{"/v1/status", "/v1/groups/a/n0/status"} {
		code, body := do("GET", path, "", "")
		var st adminclient.StatusJSON
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Group != "a" || st.Role != "LEADER" {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	if code, msg := do("PUT", "/v1/groups/b%2Fx/n0", entry("n0"), testToken); code != http.StatusCreated {
		t.Fatalf("PUT b/x/n0: %d %s", code, msg)
	}
	b := h.Member("b/x", "n0")
	awaitRole(t, b, protocol.LEADER)
	term := b.Status().Term
	if code, _ := do("GET", "/v1/status", "", ""); code != http.StatusNotFound {
		t.Fatalf("GET /v1/status of a process of two members: %d, want 404", code)
	}
	if code, body := do("GET", "/v1/groups/b%2Fx/n0/leader", "", ""); code != http.StatusOK {
		t.Fatalf("GET b/x's leader check: %d %s", code, body)
	}
	// /readyz of a host of several: every member knows a leader. A member of a group whose
	// other members never run knows none.
	if code, body := do("GET", "/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("GET /readyz with every member leading: %d %s", code, body)
	}
	lone := fmt.Sprintf(`{"peers":"n0-%s;n1-127.0.0.1:1;n2-127.0.0.1:2"}`, addr)
	if code, msg := do("PUT", "/v1/groups/c/n0", lone, testToken); code != http.StatusCreated {
		t.Fatalf("PUT c/n0: %d %s", code, msg)
	}
	if code, body := do("GET", "/readyz", "", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"withoutLeader": 1`) {
		t.Fatalf("GET /readyz with c/n0 leaderless: %d %s", code, body)
	}
	if code, msg := do("DELETE", "/v1/groups/c/n0", "", testToken); code != http.StatusOK {
		t.Fatalf("DELETE c/n0: %d %s", code, msg)
	}
	if code, _ := do("DELETE", "/v1/groups/a/n0", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("DELETE without the token: %d", code)
	}
	if code, msg := do("DELETE", "/v1/groups/a/n0", "", testToken); code != http.StatusOK {
		t.Fatalf("DELETE a/n0: %d %s", code, msg)
	}
	if h.Member("a", "n0") != nil {
		t.Fatal("a/n0 still on the host")
	}
	for _, r := range []struct{ method, path string }{{"DELETE", "/v1/groups/a/n0"}, {"GET", "/v1/groups/a/n0/status"}} {
		if code, _ := do(r.method, r.path, "", testToken); code != http.StatusNotFound {
			t.Errorf("%s %s of a removed member: %d, want 404", r.method, r.path, code)
		}
	}
	if st := b.Status(); st.Role != protocol.LEADER || st.Term != term {
		t.Fatalf("b/x changed when a/n0 left: %+v, want leader at %d", st, term)
	}
	// POST /v1/drain is the host's Drain: b/x has no member elsewhere, so nothing moves.
	if code, msg := do("POST", "/v1/drain", "", testToken); code != http.StatusOK {
		t.Fatalf("POST /v1/drain: %d %s, want 200", code, msg)
	}
	if code, msg := do("POST", "/v1/undrain", "", testToken); code != http.StatusOK {
		t.Fatalf("POST /v1/undrain: %d %s, want 200", code, msg)
	}
	if code, _ := do("POST", "/v1/undrain", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("POST /v1/undrain without the token: %d", code)
	}
}

// TestHostAdminRefusesAMemberWhosePeersDiffer: PUT of a member whose peers differ from those of
// a member of its group already on the host is refused (422), its error naming both peers
// lists, as a config file with such entries is (issue 29, "Bad input"); the member there is
// untouched, and a PUT with the group's peers is then accepted.
func TestHostAdminRefusesAMemberWhosePeersDiffer(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(t, port, t.TempDir())
	put := func(id, peers string) (int, string) {
		t.Helper()
		return sendWithToken(t, "PUT", "http://"+d.HTTPAddr()+"/v1/groups/a/"+id, fmt.Sprintf(`{"peers":%q}`, peers), testToken)
	}
	peers := fmt.Sprintf("n0-%s;n1-%s;n2-127.0.0.1:1", addr, addr)
	if code, msg := put("n0", peers); code != http.StatusCreated {
		t.Fatalf("PUT a/n0: %d %s", code, msg)
	}
	n0 := h.Member("a", "n0")
	before := n0.Status()
	differ := fmt.Sprintf("n0-%s;n1-%s", addr, addr)
	code, body := put("n1", differ)
	var e struct{ Error string }
	if code != http.StatusUnprocessableEntity || json.Unmarshal([]byte(body), &e) != nil {
		t.Fatalf("PUT a/n1 with peers %q beside a/n0's %q: %d %s, want 422", differ, peers, code, body)
	}
	for _, want := range []string{differ, peers} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("the refusal %q does not name the peers %q", e.Error, want)
		}
	}
	if h.Member("a", "n1") != nil {
		t.Fatal("the refused member a/n1 is on the host")
	}
	if st := n0.Status(); h.Member("a", "n0") != n0 || st.Term != before.Term || st.Role == protocol.UNKNOWN {
		t.Fatalf("a/n0 changed when a/n1 was refused: %+v, was %+v", st, before)
	}
	if code, msg := put("n1", peers); code != http.StatusCreated {
		t.Fatalf("PUT a/n1 with a/n0's peers: %d %s", code, msg)
	}
}

// drainingHost is a host whose Drain and Undrain count their calls and fail as told, so the
// routes can be checked apart from server.Host's own.
type drainingHost struct {
	*server.Host
	drains, undrains int
	fail             error
}

func (h *drainingHost) Drain(ctx context.Context) error {
	h.drains++
	return h.fail
}

func (h *drainingHost) Undrain() { h.undrains++ }

// POST /v1/drain and /v1/undrain call the host's Drain and Undrain, with the token; a drain
// that fails answers 500 with its error.
func TestDrainRoutesCallTheHost(t *testing.T) {
	port := freePorts(t, 1)[0]
	h, d := newTestHost(t, port, t.TempDir())
	dh := &drainingHost{Host: h}
	d.SetHost(dh, nil)
	base := "http://" + d.HTTPAddr()
	if code, _ := sendWithToken(t, "POST", base+"/v1/drain", "", ""); code != http.StatusUnauthorized || dh.drains != 0 {
		t.Fatalf("drain without the token: %d, %d drains", code, dh.drains)
	}
	if code, body := sendWithToken(t, "POST", base+"/v1/drain", "", testToken); code != http.StatusOK || dh.drains != 1 {
		t.Fatalf("drain: %d %s, %d drains", code, body, dh.drains)
	}
	dh.fail = fmt.Errorf("host still leads g7")
	if code, body := sendWithToken(t, "POST", base+"/v1/drain", "", testToken); code != http.StatusInternalServerError ||
		!strings.Contains(body, "still leads g7") {
		t.Fatalf("a failed drain: %d %s", code, body)
	}
	if code, body := sendWithToken(t, "POST", base+"/v1/undrain", "", testToken); code != http.StatusOK || dh.undrains != 1 {
		t.Fatalf("undrain: %d %s, %d undrains", code, body, dh.undrains)
	}
}

// addUnstarted adds n one-member groups ("g0000", ...) to h, not started: a listing reads
// them as they are.
func addUnstarted(t testing.TB, h *server.Host, addr string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := h.AddGroup(server.Config{Group: fmt.Sprintf("g%04d", i), SelfID: "n0", Peers: "n0-" + addr, Election: fastTimings()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupsPageReadsAsItGoes: a listing's order is kept between requests (a tool pages
// through every member of a host of thousands every few hundred milliseconds), yet a member
// added or removed since shows at once; a page starts at its cursor and at its group; and it
// reads each member's summary without allocating for it (Status allocated for every member
// listed: a tenth of a survivor's CPU in a 10,000-group failover while a tool polled it).
func TestGroupsPageReadsAsItGoes(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(t, port, t.TempDir())
	addUnstarted(t, h, addr, 0, 300)
	list := func(gq groupsQuery) []string {
		var out []string
		for _, g := range d.groupsPage(gq).Groups {
			out = append(out, g.Group+"/"+g.SelfID)
		}
		return out
	}
	all := groupsQuery{limit: maxGroupsPage}
	if got := list(all); len(got) != 300 || got[0] != "g0000/n0" || got[299] != "g0299/n0" {
		t.Fatalf("listed %d members from %v", len(got), got[:min(3, len(got))])
	}
	// A member added after a listing, and one removed, show in the next.
	addUnstarted(t, h, addr, 300, 1)
	if got := list(all); len(got) != 301 || got[300] != "g0300/n0" {
		t.Fatalf("after an add: %d members, last %v", len(got), got[len(got)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.RemoveGroup(ctx, "g0007", "n0"); err != nil {
		t.Fatal(err)
	}
	if got := list(all); len(got) != 300 || got[7] != "g0008/n0" {
		t.Fatalf("after a removal: %d members, the eighth %v", len(got), got[7])
	}
	// The cursor and the group filter start the page where they say.
	if got := list(groupsQuery{limit: 2, afterGroup: "g0100", afterID: "n0"}); fmt.Sprint(got) != "[g0101/n0 g0102/n0]" {
		t.Fatalf("after g0100/n0: %v", got)
	}
	if got := list(groupsQuery{limit: 5, group: "g0200", hasGroup: true}); fmt.Sprint(got) != "[g0200/n0]" {
		t.Fatalf("group g0200: %v", got)
	}
	if got := list(groupsQuery{limit: 5, group: "g0007", hasGroup: true}); len(got) != 0 {
		t.Fatalf("the removed group g0007 listed: %v", got)
	}
	// Allocations: the page's slice grows by doubling, nothing is made per member.
	if a := testing.AllocsPerRun(20, func() { d.groupsPage(all) }); a > 30 {
		t.Fatalf("a page of 300 members made %.0f allocations, want a few for the page itself", a)
	}
}

// TestGroupsPageFiltersWithCursors: a role filter pages by its own matches (the next cursor
// names the last one listed, and the next page starts after it whatever does not match in
// between), and a group filter honours a cursor inside the group and one past it. Each row
// says what Summary says, which is what Status says, for a leader, a follower and a stopped
// member.
func TestGroupsPageFiltersWithCursors(t *testing.T) {
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(t, port, t.TempDir())
	// Groups a..f of one member each, started: each leads. Group m of three members here.
	for _, g := range []string{"a", "b", "c", "d", "e", "f"} {
		addStarted(t, h, g, "n0", "n0-"+addr)
	}
	trio := fmt.Sprintf("n0-%s;n1-%s;n2-%s", addr, addr, addr)
	var members []*server.Server
	for i := range 3 {
		members = append(members, addStartedWith(t, h, "m", fmt.Sprintf("n%d", i), trio, calmTimings()))
	}
	dledgertest.Eventually(t, electionLimit, "every group led", func() bool {
		_, _, ok := dledgertest.StableLeader(groupView(members, func(*server.Server) bool { return false }), 3)
		for _, g := range []string{"a", "b", "c", "d", "e", "f"} {
			ok = ok && h.Member(g, "n0").Status().Role == protocol.LEADER
		}
		return ok
	})
	// Summary is Status's role, term and leader, for the leader and the followers of m.
	for _, s := range members {
		sum, st := s.Summary(), s.Status()
		if sum.Role != st.Role || sum.Term != st.Term || sum.LeaderID != st.LeaderID {
			t.Fatalf("%s: Summary %+v, Status %v %d %q", st.SelfID, sum, st.Role, st.Term, st.LeaderID)
		}
	}
	rows := func(gq groupsQuery) (out []string, next string) {
		p := d.groupsPage(gq)
		for _, g := range p.Groups {
			out = append(out, g.Group+"/"+g.SelfID+"/"+g.Role)
		}
		return out, p.Next
	}
	// Leaders, two a page: a, b | c, d | e, f | m's leader; the followers of m never listed.
	var got []string
	gq := groupsQuery{limit: 2, role: protocol.LEADER, hasRole: true}
	for pages := 0; ; pages++ {
		page, next := rows(gq)
		got = append(got, page...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatalf("more pages than leaders: %v", got)
		}
		var ok bool
		if gq.afterGroup, gq.afterID, ok = parseGroupsCursor(next); !ok || next != strings.TrimSuffix(strings.Join(strings.Split(page[1], "/")[:2], "/"), "/") {
			t.Fatalf("next %q after the page %v", next, page)
		}
	}
	if len(got) != 7 || got[6][:2] != "m/" {
		t.Fatalf("leaders listed: %v", got)
	}
	// Group m from a cursor inside it, and from one past it.
	if page, _ := rows(groupsQuery{limit: 10, group: "m", hasGroup: true, afterGroup: "m", afterID: "n0"}); len(page) != 2 || page[0][:4] != "m/n1" || page[1][:4] != "m/n2" {
		t.Fatalf("group m after m/n0: %v", page)
	}
	if page, _ := rows(groupsQuery{limit: 10, group: "c", hasGroup: true, afterGroup: "d", afterID: "n0"}); len(page) != 0 {
		t.Fatalf("group c after d/n0: %v", page)
	}
	// A stopped member's Summary is its final event's, as its Status.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := h.Member("a", "n0")
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if sum, st := a.Summary(), a.Status(); sum.Role != protocol.UNKNOWN || sum.Role != st.Role || sum.Term != st.Term || sum.LeaderID != st.LeaderID {
		t.Fatalf("stopped: Summary %+v, Status %v %d %q", sum, st.Role, st.Term, st.LeaderID)
	}
}

// BenchmarkGroupsListing: one GET /v1/groups page of 1,000 members out of 5,000, as a tool
// paging through a host's members asks for it (go test -bench GroupsListing ./server/daemon).
func BenchmarkGroupsListing(b *testing.B) {
	port := freePorts(b, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h, d := newTestHost(b, port, b.TempDir())
	addUnstarted(b, h, addr, 0, 5000)
	handler := d.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/groups?limit=1000&after=g2000/n0", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
