package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc"
	"github.com/dledger-go/dledger/rpc/secure"
)

// groupKeys are the member keys of an in-process group: each member's current key pair and
// the trust list entries (id -> keys) every member loads.
type groupKeys struct {
	t       *testing.T
	keys    []secure.StaticKey
	entries map[string][]secure.PublicKey
}

func newGroupKeys(t *testing.T, n int) *groupKeys {
	gk := &groupKeys{t: t, entries: map[string][]secure.PublicKey{}}
	for i := 0; i < n; i++ {
		k, err := secure.GenerateStaticKey()
		if err != nil {
			t.Fatal(err)
		}
		gk.keys = append(gk.keys, k)
		gk.entries[fmt.Sprintf("n%d", i)] = []secure.PublicKey{k.Public()}
	}
	return gk
}

func (gk *groupKeys) trust() *secure.Trust {
	gk.t.Helper()
	tr, err := secure.NewTrust(gk.entries)
	if err != nil {
		gk.t.Fatal(err)
	}
	return tr
}

// memberKeyGroup starts n members that authenticate with member keys (no group key).
func memberKeyGroup(t *testing.T, n int, gk *groupKeys) *group {
	t.Helper()
	return startGroupTweaked(t, n, nil, calmTimings(), func(i int, c *Config) bool {
		c.Keys, c.MemberKey, c.Trust = secure.KeySet{}, gk.keys[i], gk.trust()
		return true
	})
}

func TestMemberKeysConfigRefused(t *testing.T) {
	gk := newGroupKeys(t, 3)
	stranger, _ := secure.GenerateStaticKey()
	good := Config{Group: "g", SelfID: "n0", Peers: "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
		MemberKey: gk.keys[0], Trust: gk.trust()}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	without := func(id string) *secure.Trust {
		e := map[string][]secure.PublicKey{}
		for k, v := range gk.entries {
			if k != id {
				e[k] = v
			}
		}
		tr, _ := secure.NewTrust(e)
		return tr
	}
	for name, c := range map[string]struct {
		mut  func(c *Config)
		want string
	}{
		"own key not in the trust list": {func(c *Config) { c.MemberKey = stranger }, "is not the trust list's key for \"n0\""},
		"self not in the trust list":    {func(c *Config) { c.Trust = without("n0") }, "\"n0\", this member, is not in the trust list"},
		"a peer not in the trust list":  {func(c *Config) { c.Trust = without("n2") }, "member \"n2\" is not in the trust list"},
		"key without trust":             {func(c *Config) { c.Trust = nil }, "need the group's trust list"},
		"trust without key":             {func(c *Config) { c.MemberKey = secure.StaticKey{} }, "need this member's key pair"},
		"and a group key":               {func(c *Config) { c.Keys = testKeys }, "exclude Keys and Insecure"},
		"and insecure":                  {func(c *Config) { c.Insecure = true }, "exclude Keys and Insecure"},
	} {
		cfg := good
		c.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// leaderTerms records, from every member's role events, which member led each term.
type leaderTerms struct {
	mu     sync.Mutex
	t      *testing.T
	leader map[int64]string
}

func (lt *leaderTerms) watch(g *group) {
	for _, s := range g.servers {
		cancel := s.Subscribe(func(ev dledger.RoleEvent) {
			if ev.Role != Leader {
				return
			}
			lt.mu.Lock()
			defer lt.mu.Unlock()
			if prev, ok := lt.leader[ev.Term]; ok && prev != ev.LeaderID {
				lt.t.Errorf("two leaders at term %d: %s and %s", ev.Term, prev, ev.LeaderID)
			}
			lt.leader[ev.Term] = ev.LeaderID
		})
		lt.t.Cleanup(cancel)
	}
}

func (lt *leaderTerms) terms() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return len(lt.leader)
}

// TestReloadRotatesEveryKeyUnderFailover: a running group replaces every member's key, one
// member at a time in three reloads (its new key added to every trust list; the member
// switches; its old key dropped everywhere), while leadership is transferred in the middle
// of a revoking reload (of a member the transfer does not need). Dropping a key closes exactly the two connections each other member
// had with the rotated member (counted revoked) and nothing else; the group keeps one
// leader per term and changes leader only for the transfer; nothing but revocations is
// counted as an authentication failure; and afterwards an old key is refused as revoked.
func TestReloadRotatesEveryKeyUnderFailover(t *testing.T) {
	const n = 3
	gk := newGroupKeys(t, n)
	g := memberKeyGroup(t, n, gk)
	leader, term := g.awaitAllFollow(electionLimit)
	g.awaitConnected(electionLimit)
	lt := &leaderTerms{t: t, leader: map[int64]string{term: leader}}
	lt.watch(g)
	old := append([]secure.StaticKey(nil), gk.keys...)

	reload := func(i int) int {
		t.Helper()
		closed, err := g.servers[i].ReloadPeerKeys(gk.keys[i], gk.trust())
		if err != nil {
			t.Fatalf("n%d reload: %v", i, err)
		}
		return closed
	}
	// The transfer races the revoking reload of the first member that neither leads nor is
	// the transferee: the transfer's own messages then travel on a link the reload keeps, and
	// the transferee's quorum (itself and the old leader) does not need the rotated member.
	rotatedDuringTransfer := 0
	if rotatedDuringTransfer == g.index(leader) {
		rotatedDuringTransfer = 1
	}
	transferee := fmt.Sprintf("n%d", 3-g.index(leader)-rotatedDuringTransfer)
	var transfer sync.WaitGroup
	var transferErr error
	for m := 0; m < n; m++ {
		id := fmt.Sprintf("n%d", m)
		next, err := secure.GenerateStaticKey()
		if err != nil {
			t.Fatal(err)
		}
		gk.entries[id] = []secure.PublicKey{gk.keys[m].Public(), next.Public()} // step 1: accept both
		for i := range g.servers {
			if c := reload(i); c != 0 {
				t.Fatalf("member %s step 1: n%d closed %d connections", id, i, c)
			}
		}
		gk.keys[m] = next // step 2: the member switches
		if c := reload(m); c != 0 {
			t.Fatalf("member %s step 2: closed %d connections", id, c)
		}
		if m == rotatedDuringTransfer {
			g.awaitAlive(leader) // a transfer needs the transferee answering the leader's heartbeats
			transfer.Add(1)
			go func() {
				defer transfer.Done()
				ctx, cancel := context.WithTimeout(context.Background(), electionLimit)
				defer cancel()
				// A transferee that finds its own passes late (a loaded machine) refuses, the
				// leader unchanged: ask again, as an operator would.
				for try := 0; try < 5; try++ {
					_, transferErr = g.servers[g.index(leader)].TransferLeadership(ctx, transferee)
					if !errors.Is(transferErr, ErrTransfereeFailed) {
						return
					}
				}
			}()
		}
		gk.entries[id] = []secure.PublicKey{next.Public()} // step 3: drop the old key
		closed := 0
		for i := range g.servers {
			// Each other member closes its connection to the member and the member's to it,
			// both on the old key: 2, or fewer if load made one redial since step 2 (with the
			// new key). The member closes none: no peer's key changed.
			c := reload(i)
			if i == m && c != 0 || c > 2 {
				t.Fatalf("member %s step 3: n%d closed %d connections", id, i, c)
			}
			if c != 2 && i != m {
				t.Logf("member %s step 3: n%d closed %d connections (a redial since step 2)", id, i, c)
			}
			closed += c
		}
		if closed == 0 {
			t.Fatalf("member %s step 3: no connection on its old key was closed", id)
		}
		transfer.Wait()
		g.awaitConnected(electionLimit)
	}
	// The transfer may end without an answer (ErrOutcomeUnknown) and still happen: the leader
	// the group settles on says which. Either way exactly the leader changes it made.
	l, _ := g.awaitAllFollow(electionLimit)
	want := 2
	switch {
	case l == transferee && (transferErr == nil || errors.Is(transferErr, ErrOutcomeUnknown)):
	case l == leader && transferErr != nil:
		t.Logf("transfer %s -> %s did not happen: %v", leader, transferee, transferErr)
		want = 1
	default:
		t.Fatalf("leader %s after the rotation; the transfer %s -> %s returned %v", l, leader, transferee, transferErr)
	}
	// Role events reach subscribers asynchronously: wait for the ones the status shows.
	dledgertest.Eventually(t, electionLimit, "the leader events", func() bool { return lt.terms() >= want })
	if got := lt.terms(); got != want {
		t.Fatalf("%d terms had a leader during the rotation, want %d", got, want)
	}
	for i := range g.servers {
		for _, r := range rpc.AuthFailureReasons() {
			if v := g.authFailures(i, r); r != secure.ReasonRevoked && v != 0 {
				t.Errorf("n%d counted %v auth failures %q", i, v, r)
			}
		}
		if v := g.authFailures(i, secure.ReasonRevoked); v < 2 {
			t.Errorf("n%d counted %v revocations, want at least its two closes per rotated peer", i, v)
		}
	}
	// n0's old key dials n1: refused as revoked.
	oldID, err := secure.NewIdentity(old[0], mustTrust(t, map[string][]secure.PublicKey{"n0": {old[0].Public()}, "n1": {gk.keys[1].Public()}}), "n0")
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := rpc.NewPeerKeys(oldID)
	before := g.authFailures(1, secure.ReasonRevoked)
	g.outsider(1, rpc.Auth{PeerKeys: pk, Group: "g", SelfID: "n0"})
	dledgertest.Eventually(t, electionLimit, "the old key refused as revoked", func() bool { return g.authFailures(1, secure.ReasonRevoked) > before })
}

// awaitAlive waits until leader has heard from every member in its last heartbeat round.
func (g *group) awaitAlive(leader string) {
	g.t.Helper()
	dledgertest.Eventually(g.t, electionLimit, leader+" hearing every member", func() bool {
		for _, p := range g.servers[g.index(leader)].Status().Peers {
			if !p.Self && !p.Alive {
				return false
			}
		}
		return true
	})
}

func mustTrust(t *testing.T, e map[string][]secure.PublicKey) *secure.Trust {
	t.Helper()
	tr, err := secure.NewTrust(e)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
