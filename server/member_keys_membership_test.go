package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
)

// Membership changes carry member keys (issue 32, docs/protocol.md 13.9).

// joinWithKey starts member id at addr with its own key pair, joining g (its trust list: every
// member of g and itself; g's members do not list it).
func joinWithKey(t *testing.T, g *group, gk *groupKeys, id, addr string, key secure.StaticKey) *Server {
	t.Helper()
	entries := map[string][]secure.PublicKey{id: {key.Public()}}
	for k, v := range gk.entries {
		entries[k] = v
	}
	s, err := New(Config{Group: "g", SelfID: id, Peers: id + "-" + addr + ";" + g.peers, DataDir: t.TempDir(),
		Election: g.cfg, Join: true, MemberKey: key, Trust: mustTrust(t, entries)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateLedger(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s
}

// TestMemberAddedWithItsKeyBecomesAVoter: a group that authenticates with member keys, whose
// trust lists do not name n3, adds n3 with its public key; every member learns the key with the
// configuration, so n3 is dialled, answers, is promoted and ends a voter following the leader.
// A member restarted with its old trust file still trusts n3 (the key is in its durable
// configuration). Removing n3 closes every link it had and its later dials are refused. Without
// the key in the configuration the leader cannot authenticate n3 and the promotion never
// finds it caught up.
func TestMemberAddedWithItsKeyBecomesAVoter(t *testing.T) {
	gk := newGroupKeys(t, 3)
	g := memberKeyGroup(t, 3, gk)
	leaderID, term := g.awaitAllFollow(electionLimit)
	leader := g.servers[g.index(leaderID)]
	k3, _ := secure.GenerateStaticKey()
	addr3 := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	n3 := joinWithKey(t, g, gk, "n3", addr3, k3)
	ctx := context.Background()

	if _, err := leader.AddNonVoterWithKey(ctx, "n3", addr3, k3.Public()); err != nil {
		t.Fatalf("add n3 with its key: %v", err)
	}
	dledgertest.Eventually(t, electionLimit, "n3 promoted", func() bool {
		_, err := leader.Promote(ctx, "n3")
		if err != nil && !errors.Is(err, ErrNotCaughtUp) {
			t.Fatalf("promote: %v", err)
		}
		return err == nil
	})
	dledgertest.Eventually(t, electionLimit, "n3 a voter following the leader", func() bool {
		st, m := n3.Status(), n3.Membership()
		return st.LeaderID == leaderID && st.Term == term && (Configuration{Voters: m.Voters}).IsVoter("n3")
	})
	for i, s := range g.servers {
		if keys := s.peerKeys.Identity().Trust().Keys("n3"); len(keys) != 1 || keys[0] != k3.Public() {
			t.Fatalf("n%d trusts %v for n3, want its key", i, keys)
		}
	}

	// A restarted follower still trusts n3: the key is in its durable configuration.
	f := (g.index(leaderID) + 1) % 3
	g.stop(f)
	g.start(f, [2]int64{})
	if keys := g.servers[f].peerKeys.Identity().Trust().Keys("n3"); len(keys) != 1 || keys[0] != k3.Public() {
		t.Fatalf("n%d after a restart trusts %v for n3, want its key", f, keys)
	}
	dledgertest.Eventually(t, electionLimit, "n3 connected to the restarted member", func() bool {
		return g.servers[f].peerKeys.LiveWith("n3") > 0
	})
	// A restarted member may start an election (it heard no leader yet): ask the leader now,
	// and not n3 (removing the leader hands over first).
	leaderID, term = awaitAgreed(t, append(slices.Clone(g.servers), n3))
	if leaderID == "n3" {
		if _, err := n3.TransferLeadership(ctx, "n0"); err != nil {
			t.Fatalf("transfer from n3: %v", err)
		}
		leaderID, term = awaitAgreed(t, append(slices.Clone(g.servers), n3))
	}
	leader = g.servers[g.index(leaderID)]

	// Removal revokes: every link with n3 closes, and its redials are refused.
	if _, err := leader.RemoveMember(ctx, "n3"); err != nil {
		t.Fatalf("remove n3: %v", err)
	}
	dledgertest.Eventually(t, electionLimit, "every link with n3 closed", func() bool {
		for _, s := range g.servers {
			if s.peerKeys.LiveWith("n3") != 0 || s.peerKeys.Identity().Trust().Keys("n3") != nil {
				return false
			}
		}
		return true
	})
	for i := range g.servers {
		n := g.authFailures(i, secure.ReasonRevoked) + g.authFailures(i, secure.ReasonUnknownMember)
		dledgertest.Eventually(t, electionLimit, fmt.Sprintf("n%d refusing n3's redial", i), func() bool {
			n3.client.Kick(fmt.Sprintf("n%d", i))
			return g.authFailures(i, secure.ReasonRevoked)+g.authFailures(i, secure.ReasonUnknownMember) > n &&
				g.servers[i].peerKeys.LiveWith("n3") == 0
		})
	}
	if l, tm := g.awaitAllFollow(electionLimit); l != leaderID || tm != term {
		t.Fatalf("after the removal: leader %s@%d became %s@%d; n3: %+v", leaderID, term, l, tm, n3.Status())
	}
}

// TestAddWithKeyRefusesBadInput: a key that is another member's (in the configuration or the
// trust file), a trust file line that disagrees, an add of a member no key names, and a key on
// a group-key group are refused with the reason, and the configuration is unchanged.
func TestAddWithKeyRefusesBadInput(t *testing.T) {
	gk := newGroupKeys(t, 3)
	g := memberKeyGroup(t, 3, gk)
	leaderID, _ := g.awaitAllFollow(electionLimit)
	leader := g.servers[g.index(leaderID)]
	ctx := context.Background()
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	k3, _ := secure.GenerateStaticKey()
	other, _ := secure.GenerateStaticKey()
	if _, err := leader.AddNonVoterWithKey(ctx, "n3", addr, k3.Public()); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		call func() error
		want string
	}{
		"a trust file member's key": {func() error {
			_, err := leader.AddNonVoterWithKey(ctx, "n4", addr, gk.keys[1].Public())
			return err
		}, "is member n1's already"},
		"an added member's key": {func() error {
			_, err := leader.AddNonVoterWithKey(ctx, "n4", addr, k3.Public())
			return err
		}, "is member n3's already"},
		"a key the trust file contradicts": {func() error {
			_, err := leader.AddNonVoterWithKey(ctx, "n2", addr, other.Public())
			return err
		}, "lists n2 with key"},
		"no key anywhere": {func() error {
			_, err := leader.AddNonVoter(ctx, "n4", addr)
			return err
		}, "n4 has no key"},
	} {
		err := c.call()
		if !errors.Is(err, ErrInvalidChange) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidChange with %q", name, err, c.want)
		}
	}
	if m := leader.Membership(); m.Epoch != 1 || len(m.NonVoters) != 1 {
		t.Fatalf("the configuration changed: %+v", m)
	}
	plain := startGroupWith(t, 3, nil, calmTimings())
	pl, _ := plain.awaitAllFollow(electionLimit)
	_, err := plain.servers[plain.index(pl)].AddNonVoterWithKey(ctx, "n3", addr, k3.Public())
	if !errors.Is(err, ErrInvalidChange) || !strings.Contains(err.Error(), "does not authenticate with member keys") {
		t.Fatalf("a key on a group-key group: %v", err)
	}
}

// TestComposeTrust: the trust file wins for the ids it lists (a disagreeing configuration key
// is a conflict), the configuration supplies the others, and no one outside the
// configurations is trusted.
func TestComposeTrust(t *testing.T) {
	gk := newGroupKeys(t, 3)
	k3, _ := secure.GenerateStaticKey()
	k4, _ := secure.GenerateStaticKey()
	gk.entries["n9"] = []secure.PublicKey{k4.Public()} // a stale line: n9 is no member
	p := func(ids ...string) []memberstate.Peer {
		var ps []memberstate.Peer
		for i, id := range ids {
			ps = append(ps, memberstate.Peer{ID: id, Addr: "127.0.0.1:" + strconv.Itoa(1000+i)})
		}
		return ps
	}
	m := Membership{Voters: p("n0", "n1", "n2"), NonVoters: p("n3"),
		Keys: []memberstate.MemberKey{{ID: "n3", Key: k3.Public().String()}, {ID: "n1", Key: k4.Public().String()}}}
	tr, conflicts, err := composeTrust(gk.trust(), m, nil, "n0")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tr.IDs(), ","); got != "n0,n1,n2,n3" {
		t.Fatalf("trusted %s, want n0..n3 (not n9)", got)
	}
	if k := tr.Keys("n1"); len(k) != 1 || k[0] != gk.keys[1].Public() {
		t.Fatalf("n1: %v, want the trust file's key", k)
	}
	if k := tr.Keys("n3"); len(k) != 1 || k[0] != k3.Public() {
		t.Fatalf("n3: %v, want the configuration's key", k)
	}
	if len(conflicts) != 1 || !strings.Contains(conflicts[0], "member n1: the trust file lists") {
		t.Fatalf("conflicts %q, want n1's", conflicts)
	}
}

// awaitAgreed waits until every member of ms follows one leader at one term, and returns them.
func awaitAgreed(t *testing.T, ms []*Server) (leader string, term int64) {
	t.Helper()
	dledgertest.Eventually(t, electionLimit, "every member following one leader", func() bool {
		leader, term = ms[0].Status().LeaderID, ms[0].Status().Term
		for _, s := range ms {
			if st := s.Status(); st.LeaderID != leader || st.Term != term || leader == "" {
				return false
			}
		}
		return true
	})
	return leader, term
}
