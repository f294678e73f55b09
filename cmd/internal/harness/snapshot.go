package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"

	"github.com/dledger-go/dledger/server/adminclient"
)

// Snapshot is what each host said its members were (GET /v1/groups), by host index; nil for a
// host that was not asked (down or paused).
type Snapshot [][]adminclient.GroupJSON

// GroupState is one group as a snapshot shows it.
type GroupState struct {
	Group string
	// LeaderHost is the host whose member reports LEADER, -1 if none or more than one does.
	LeaderHost int
	LeaderID   string
	Term       int64 // the highest term any asked member reports
	// Stable: exactly one asked member leads, every asked member reports the same term, and
	// every other asked member follows the leader.
	Stable bool
	// Members is how many asked hosts serve a member of the group.
	Members int
}

// Groups folds the snapshot into one state per group, in group order. A group whose members
// sit on one host (the proxy scenarios) is judged on those members all the same.
func (s Snapshot) Groups() []GroupState {
	byGroup := map[string]*GroupState{}
	type seen struct {
		leaders   int
		terms     map[int64]bool
		followers []adminclient.GroupJSON
	}
	aux := map[string]*seen{}
	for host, gs := range s {
		for _, m := range gs {
			st := byGroup[m.Group]
			if st == nil {
				st = &GroupState{Group: m.Group, LeaderHost: -1}
				byGroup[m.Group] = st
				aux[m.Group] = &seen{terms: map[int64]bool{}}
			}
			a := aux[m.Group]
			st.Members++
			st.Term = max(st.Term, m.Term)
			a.terms[m.Term] = true
			if m.Role == "LEADER" {
				a.leaders++
				st.LeaderHost, st.LeaderID = host, m.SelfID
			} else {
				a.followers = append(a.followers, m)
			}
		}
	}
	out := make([]GroupState, 0, len(byGroup))
	for g, st := range byGroup {
		a := aux[g]
		if a.leaders != 1 {
			st.LeaderHost, st.LeaderID = -1, ""
		}
		st.Stable = a.leaders == 1 && len(a.terms) == 1
		for _, f := range a.followers {
			if f.Role != "FOLLOWER" || f.LeaderID != st.LeaderID {
				st.Stable = false
			}
		}
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b GroupState) int {
		switch {
		case a.Group < b.Group:
			return -1
		case a.Group > b.Group:
			return 1
		}
		return 0
	})
	return out
}

// Unstable counts the groups of the snapshot that are not stable, plus the groups of want
// (names) it does not show at all.
func (s Snapshot) Unstable(want []string) int {
	n := 0
	seen := map[string]bool{}
	for _, g := range s.Groups() {
		seen[g.Group] = true
		if !g.Stable {
			n++
		}
	}
	for _, g := range want {
		if !seen[g] {
			n++
		}
	}
	return n
}

// LedBy counts the stable groups each host leads, by host index (len hosts).
func LedBy(gs []GroupState, hosts int) []int {
	led := make([]int, hosts)
	for _, g := range gs {
		if g.Stable && g.LeaderHost >= 0 && g.LeaderHost < hosts {
			led[g.LeaderHost]++
		}
	}
	return led
}

// BalanceDevPct is the leader balance: the largest |led - groups/hosts| / (groups/hosts) over
// the hosts, in percent (0: perfectly even). hosts are the hosts that share the groups
// (alive at the time); NaN without groups or hosts.
func BalanceDevPct(led []int, groups int) float64 {
	if groups == 0 || len(led) == 0 {
		return math.NaN()
	}
	fair := float64(groups) / float64(len(led))
	dev := 0.0
	for _, n := range led {
		dev = max(dev, math.Abs(float64(n)-fair)/fair)
	}
	return 100 * dev
}

// MostLed is the host that leads the most groups (the lowest index on a tie) and how many.
func MostLed(led []int) (int, int) {
	best := 0
	for j, n := range led {
		if n > led[best] {
			best = j
		}
	}
	return best, led[best]
}

// TermChanges counts the groups of before, other than skip (by name), whose highest term in
// after differs (or which after does not show).
func TermChanges(before, after []GroupState, skip map[string]bool) int {
	now := map[string]int64{}
	for _, g := range after {
		now[g.Group] = g.Term
	}
	n := 0
	for _, g := range before {
		if skip[g.Group] {
			continue
		}
		if t, ok := now[g.Group]; !ok || t != g.Term {
			n++
		}
	}
	return n
}

// getJSON is GET path on host j's admin API, decoded into v; an answer other than 200 is an
// error with its body.
func (h *Hosts) getJSON(ctx context.Context, j int, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.Procs[j].HTTPAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v)
}

// copyLimited copies at most n bytes of r to w.
func copyLimited(w io.Writer, r io.Reader, n int64) (int64, error) {
	return io.Copy(w, io.LimitReader(r, n))
}
