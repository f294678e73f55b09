package harness

import (
	"fmt"

	"github.com/dledger-go/dledger/server/adminclient"
)

// Leader is a leader as the members report it: who, and in which term (0 for a system that
// reports no term).
type Leader struct {
	ID   string
	Term int64
}

func (k Leader) String() string {
	if k.ID == "" {
		return "none"
	}
	return fmt.Sprintf("%s@%d", k.ID, k.Term)
}

// View is one member's answer to "who leads?", whatever the system: the one predicate below
// judges ours, etcd and ZooKeeper alike.
type View struct {
	Self     string
	Leader   Leader // the leader it follows or is; ID "" if it knows none
	IsLeader bool   // it says it leads
	Follows  bool   // it says it follows (for a system without roles: it does not lead)
}

// ViewOf is our member's status as a View.
func ViewOf(st adminclient.StatusJSON) View {
	return View{Self: st.SelfID, Leader: Leader{ID: st.LeaderID, Term: st.Term},
		IsLeader: st.Role == "LEADER", Follows: st.Role == "FOLLOWER"}
}

// Quorum is the majority of a group of n.
func Quorum(n int) int { return n/2 + 1 }

// Agree counts the members whose latest answer names leader k.
func Agree[T any](latest map[int]T, view func(T) View, k Leader) int {
	n := 0
	for _, x := range latest {
		if view(x).Leader == k {
			n++
		}
	}
	return n
}

// QuorumLeader is the leader that a quorum of a group of n members (counting those that did not
// answer) names in the same term in latest, the members' latest answers, leaving out no leader
// at all and those skip (if set) rejects. It is the end of a failover: a majority can serve
// again. Two leaders can not both have a quorum of one set of answers.
func QuorumLeader[T any](latest map[int]T, n int, view func(T) View, skip func(Leader) bool) (Leader, bool) {
	count := map[Leader]int{}
	for _, x := range latest {
		k := view(x).Leader
		if k.ID == "" || (skip != nil && skip(k)) {
			continue
		}
		count[k]++
		if count[k] >= Quorum(n) {
			return k, true
		}
	}
	return Leader{}, false
}

// Unanimous reports the leader and its member index if all n members answered, exactly one
// leads, and every other one follows it in its term: the stable group a fault starts from.
func Unanimous[T any](latest map[int]T, n int, view func(T) View) (Leader, int, bool) {
	if len(latest) != n {
		return Leader{}, -1, false
	}
	var k Leader
	idx := -1
	for i, x := range latest {
		if v := view(x); v.IsLeader {
			if idx >= 0 || v.Leader.ID != v.Self {
				return Leader{}, -1, false
			}
			k, idx = v.Leader, i
		}
	}
	if idx < 0 {
		return Leader{}, -1, false
	}
	for _, x := range latest {
		if v := view(x); v.Leader != k || (v.Self != k.ID && !v.Follows) {
			return Leader{}, -1, false
		}
	}
	return k, idx, true
}
