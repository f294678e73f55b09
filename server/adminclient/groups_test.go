package adminclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A client of one member of a process of many asks that member's routes, its name escaped as
// one path segment; the process's own routes stay where they are.
func TestMemberRoutesOfAHost(t *testing.T) {
	c := New("127.0.0.1:1").Member("b/x", "n0")
	for path, want := range map[string]string{
		"/v1/status":         "http://127.0.0.1:1/v1/groups/b%2Fx/n0/status",
		"/v1/leader?wait=1s": "http://127.0.0.1:1/v1/groups/b%2Fx/n0/leader?wait=1s",
		"/readyz":            "http://127.0.0.1:1/v1/groups/b%2Fx/n0/readyz",
		"/v1/groups?limit=1": "http://127.0.0.1:1/v1/groups?limit=1",
		"/v1/groups/a/n1":    "http://127.0.0.1:1/v1/groups/a/n1",
	} {
		if got := c.URL(path); got != want {
			t.Errorf("URL(%q) = %q, want %q", path, got, want)
		}
	}
	if got := New("127.0.0.1:1").URL("/v1/status"); got != "http://127.0.0.1:1/v1/status" {
		t.Errorf("a process's one member: %q", got)
	}
}

// Groups pages through GET /v1/groups with the query's filters; AddMember, RemoveMember and
// Drain send the token and sort the answers into the member or an *HTTPError.
func TestGroupsAddRemoveDrain(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/v1/groups" && r.URL.Query().Get("after") == "":
			w.Write([]byte(`{"groups":[{"group":"a","selfId":"n0","role":"LEADER","term":1,"leaderId":"n0"}],"next":"a/n0"}`))
		case r.URL.Path == "/v1/groups":
			w.Write([]byte(`{"groups":[{"group":"b","selfId":"n0","role":"FOLLOWER","term":2,"leaderId":"n1"}]}`))
		case r.Method == http.MethodPut:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"group":"c","selfId":"n0","role":"CANDIDATE","term":0,"leaderId":""}`))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no member n0 of group c on this host"}`))
		default:
			w.WriteHeader(http.StatusNotImplemented)
			w.Write([]byte(`{"error":"this build's host has no drain"}`))
		}
	}))
	defer srv.Close()
	c := &Client{Addr: srv.URL, HTTP: &http.Client{Timeout: 5 * time.Second}, Token: "tok"}
	ctx := context.Background()
	all, err := c.AllGroups(ctx, GroupsQuery{Role: "LEADER", Limit: 1})
	if err != nil || len(all) != 2 || all[0].Group != "a" || all[1].Group != "b" {
		t.Fatalf("AllGroups: %+v %v", all, err)
	}
	if g, err := c.AddMember(ctx, "c", "n0", MemberEntryJSON{Peers: "n0-h:1"}); err != nil || g.Group != "c" || g.Role != "CANDIDATE" {
		t.Fatalf("AddMember: %+v %v", g, err)
	}
	var he *HTTPError
	if _, err := c.RemoveMember(ctx, "c", "n0"); !errors.As(err, &he) || he.Status != 404 || he.Message == "" {
		t.Fatalf("RemoveMember of a member not there: %v", err)
	}
	if err := c.Drain(ctx); !errors.As(err, &he) || he.Status != 501 {
		t.Fatalf("Drain of a host without it: %v", err)
	}
	if err := c.Undrain(ctx); !errors.As(err, &he) || he.Status != 501 {
		t.Fatalf("Undrain of a host without it: %v", err)
	}
	want := []string{"GET /v1/groups?limit=1&role=LEADER ", "GET /v1/groups?after=a%2Fn0&limit=1&role=LEADER ",
		"PUT /v1/groups/c/n0 Bearer tok", "DELETE /v1/groups/c/n0 Bearer tok", "POST /v1/drain Bearer tok",
		"POST /v1/undrain Bearer tok"}
	if len(got) != len(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, got[i], want[i])
		}
	}
}
