package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// On a host of many groups (issue 31 with issue 29's hosts and links), each group's
// membership is its own: a non-voter added to one group changes its configuration only, a
// link is opened to the new member's host and closed again once the member is removed, and the
// Go API's errors are the sentinels (a follower names the leader; an id that exists, a
// non-member, a non-voter that has not caught up are refused as such).
func TestHostGroupsChangeMembersApart(t *testing.T) {
	calm := fastTimings()
	calm.MaxHeartBeatLeak = 30 // no election for a stall of a loaded machine: the test counts none
	// No balancer: it would move leadership between hosts, which this test counts as a change.
	hosts, members, names := linkedHosts(t, 3, 2, calm, func(_ int, c *HostConfig) { c.NoBalance = true })
	// Every member follows before the leaders are read (awaitAllFollow): with a quorum only, the
	// third member may still be a candidate of the election's last rounds, and its round at
	// term+1 deposes the leader, which the check at the end reports as a change.
	leaders, terms := awaitAllFollow(t, members, names)
	g0 := members[names[0]]
	var leader, follower *Server
	dledgertest.Eventually(t, electionLimit, "a follower that knows the leader", func() bool {
		for _, s := range g0 {
			switch st := s.Status(); {
			case st.Role == protocol.LEADER:
				leader = s
			case st.LeaderID == leaders[names[0]]:
				follower = s
			}
		}
		return leader != nil && follower != nil
	})
	ctx := context.Background()
	nowhere := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	_, err := follower.AddNonVoter(ctx, "n9", nowhere)
	var me *MembershipError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &me) || me.LeaderID != leaders[names[0]] {
		t.Fatalf("add asked of a follower: %v", err)
	}
	c, err := leader.AddNonVoter(ctx, "n9", nowhere)
	if err != nil || c.Epoch != 1 || !c.IsMember("n9") || c.IsVoter("n9") {
		t.Fatalf("add: %v, %v", c, err)
	}
	if n := hostOf(hosts, leader).links.count(); n != 3 {
		t.Fatalf("the leader's host has %d links after a member on a new host was added, want 3", n)
	}
	for _, c := range []struct {
		err  error
		call func() error
	}{
		{ErrMemberExists, func() error { _, err := leader.AddNonVoter(ctx, "n9", nowhere); return err }},
		{ErrUnknownMember, func() error { _, err := leader.Promote(ctx, "n7"); return err }},
		{ErrNotCaughtUp, func() error { _, err := leader.Promote(ctx, "n9"); return err }},
	} {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("got %v, want %v", err, c.err)
		}
	}
	for _, s := range members[names[1]] {
		if m := s.Membership(); m.Epoch != 0 || len(m.NonVoters) != 0 {
			t.Fatalf("the other group's configuration changed: %+v", m)
		}
	}
	if _, err := leader.RemoveMember(ctx, "n9"); err != nil {
		t.Fatal(err)
	}
	dledgertest.Eventually(t, electionLimit, "the link to the removed member's host to close", func() bool {
		return hostOf(hosts, leader).links.count() == 2
	})
	for _, g := range names {
		for _, s := range members[g] {
			if st := s.Status(); st.LeaderID != leaders[g] || st.Term != terms[g] {
				t.Fatalf("group %s: %s sees %s@%d, want %s@%d", g, st.SelfID, st.LeaderID, st.Term, leaders[g], terms[g])
			}
		}
	}
}

// hostOf is the host that serves s.
func hostOf(hosts []*Host, s *Server) *Host {
	for _, h := range hosts {
		if s.host == h {
			return h
		}
	}
	return nil
}

// A member that joins a running group on a host of many groups (HostMember.Join, `join: true`
// in a configs: entry or `dledger groups add --join`): it starts knowing itself and the
// group's voters, the leader adds and promotes it, and it ends a voter of the leader's
// configuration, with no leader or term change in the group. On a host it must name the
// voters (docs/protocol.md 13.6): a host link takes a group's request only from a member the
// route names, so a joiner that named one member heard heartbeats only while that one led
// (this test failed whenever n1 led, about one run in five).
func TestHostMemberJoinsARunningGroup(t *testing.T) {
	calm := calmTimings() // the test counts no election: a 1 s heartbeat rides out a loaded machine
	hosts, _, _ := linkedHosts(t, 4, 0, calm, func(_ int, c *HostConfig) { c.NoBalance = true })
	var voters []string
	for i, h := range hosts[:3] {
		voters = append(voters, fmt.Sprintf("n%d-%s", i, h.hostID))
	}
	peers := strings.Join(voters, ";")
	members := map[string][]*Server{}
	for i, h := range hosts[:3] {
		members["g"] = append(members["g"], addStartedWith(t, h, "g", fmt.Sprintf("n%d", i), peers, calm))
	}
	leaders, terms := awaitLeaders(t, members, []string{"g"}, func(*Server) bool { return false })
	var leader *Server
	for _, s := range members["g"] {
		if s.Status().SelfID == leaders["g"] {
			leader = s
		}
	}
	entries, err := ParseHostMembers(strings.NewReader(fmt.Sprintf(
		"configs:\n  - {group: g, selfId: n3, peers: %q, join: true}\n", "n3-"+hosts[3].hostID+";"+peers)), "join.yaml")
	if err != nil {
		t.Fatal(err)
	}
	joiner, err := hosts[3].AddGroup(entries[0].Config(Config{Election: calm}))
	if err != nil {
		t.Fatal(err)
	}
	if err := joiner.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := joiner.Start(); err != nil {
		t.Fatal(err)
	}
	if m := joiner.Membership(); !m.Joining {
		t.Fatalf("a joining member's membership before the leader adds it: %+v", m)
	}
	ctx := context.Background()
	if _, err := leader.AddNonVoter(ctx, "n3", hosts[3].hostID); err != nil {
		t.Fatal(err)
	}
	dledgertest.Eventually(t, electionLimit, "the joiner promoted once caught up", func() bool {
		_, err := leader.Promote(ctx, "n3")
		return err == nil
	})
	dledgertest.Eventually(t, electionLimit, "the joiner a voter that follows the leader", func() bool {
		m, st := joiner.Membership(), joiner.Status()
		return !m.Joining && slices.ContainsFunc(m.Voters, func(p memberstate.Peer) bool { return p.ID == "n3" }) && st.LeaderID == leaders["g"] && st.Term == terms["g"]
	})
	for _, s := range members["g"] {
		if st := s.Status(); st.LeaderID != leaders["g"] || st.Term != terms["g"] {
			t.Fatalf("%s sees %s@%d, want %s@%d", st.SelfID, st.LeaderID, st.Term, leaders["g"], terms["g"])
		}
	}
}
