package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// A process that hosts many group members (`dledger server --config FILE` with configs:)
// serves each member's routes under /v1/groups/{group}/{id}/ (status, transfer, watch, leader,
// members, ledger, readyz), lists them at GET /v1/groups, and adds and removes members with
// PUT and DELETE of /v1/groups/{group}/{id}. A process of one member serves the same routes
// too, so a tool that names the group works with either.

// Member is a client of member id of group on the same process as c (c's address, token and
// HTTP client).
func (c *Client) Member(group, id string) *Client {
	m := *c
	m.Group, m.SelfID = group, id
	return &m
}

// memberPath maps a single-member route to the member's route on a host: /v1/status to
// /v1/groups/{group}/{id}/status, /readyz to /v1/groups/{group}/{id}/readyz.
func (c *Client) memberPath(path string) string {
	if c.Group == "" || strings.HasPrefix(path, "/v1/groups") {
		return path
	}
	base := "/v1/groups/" + url.PathEscape(c.Group) + "/" + url.PathEscape(c.SelfID) + "/"
	if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		return base + rest
	}
	return base + strings.TrimPrefix(path, "/")
}

// GroupsQuery filters and pages GET /v1/groups; zero fields take the server's defaults.
type GroupsQuery struct {
	Group string // only this group's members
	Role  string // only members in this role (LEADER, FOLLOWER, CANDIDATE, UNKNOWN)
	Limit int    // page size (the server's default 100, at most 1000)
	After string // a previous page's Next
}

// Groups is one page of GET /v1/groups: the process's members, ordered by group then id.
func (c *Client) Groups(ctx context.Context, q GroupsQuery) (GroupsJSON, error) {
	v := url.Values{}
	for k, s := range map[string]string{"group": q.Group, "role": q.Role, "after": q.After} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/v1/groups"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out GroupsJSON
	err := c.get(ctx, path, &out)
	return out, err
}

// AllGroups is every page of GET /v1/groups for q (q.After and q.Limit are the first page's).
func (c *Client) AllGroups(ctx context.Context, q GroupsQuery) ([]GroupJSON, error) {
	var all []GroupJSON
	for {
		page, err := c.Groups(ctx, q)
		if err != nil {
			return all, err
		}
		all = append(all, page.Groups...)
		if page.Next == "" {
			return all, nil
		}
		q.After = page.Next
	}
}

// MemberEntryJSON is the body of PUT /v1/groups/{group}/{id}: an entry of a host's configs:
// list (DLedger's keys). Group and SelfID may be left empty: the path names them.
type MemberEntryJSON struct {
	Group              string `json:"group,omitempty"`
	SelfID             string `json:"selfId,omitempty"`
	Peers              string `json:"peers"` // "n0-host:port;n1-host:port;..."
	PreferredLeaderIDs string `json:"preferredLeaderIds,omitempty"`
	// Join: the member is being added to the running group (its leader adds it with
	// `dledger members add`): it takes its configuration from the leader (issue 31).
	Join bool `json:"join,omitempty"`
}

// AddMember is PUT /v1/groups/{group}/{id}: the process adds member id of group with e's peers
// and starts it. The answer is the new member as GET /v1/groups lists it; a refusal is an
// *HTTPError (400 a bad entry, 409 already there, 401 no token, 501 a process with no host).
func (c *Client) AddMember(ctx context.Context, group, id string, e MemberEntryJSON) (GroupJSON, error) {
	return c.groupCall(ctx, http.MethodPut, group, id, e, http.StatusCreated)
}

// RemoveMember is DELETE /v1/groups/{group}/{id}: the member stops (a leader hands over first)
// and leaves the process; the answer is its last state.
func (c *Client) RemoveMember(ctx context.Context, group, id string) (GroupJSON, error) {
	return c.groupCall(ctx, http.MethodDelete, group, id, struct{}{}, http.StatusOK)
}

func (c *Client) groupCall(ctx context.Context, method, group, id string, body any, want int) (GroupJSON, error) {
	path := "/v1/groups/" + url.PathEscape(group) + "/" + url.PathEscape(id)
	status, raw, err := c.send(ctx, method, path, body)
	if err != nil {
		return GroupJSON{}, err
	}
	if status != want {
		return GroupJSON{}, httpError(status, raw)
	}
	var g GroupJSON
	if err := json.Unmarshal(raw, &g); err != nil {
		return GroupJSON{}, fmt.Errorf("bad %s JSON: %v", path, err)
	}
	return g, nil
}

// Drain is POST /v1/drain: every group the process leads hands its leadership over (before a
// restart); it returns once the process answered. A refusal is an *HTTPError (501: a process
// whose host cannot drain).
func (c *Client) Drain(ctx context.Context) error { return c.post(ctx, "/v1/drain") }

// Undrain is POST /v1/undrain: a drained process may lead again.
func (c *Client) Undrain(ctx context.Context) error { return c.post(ctx, "/v1/undrain") }

// post is a POST of path without a body that must answer 200.
func (c *Client) post(ctx context.Context, path string) error {
	status, raw, err := c.send(ctx, http.MethodPost, path, struct{}{})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return httpError(status, raw)
	}
	return nil
}
