package compare

import (
	"context"
	"net/http"
	"os/exec"
	"time"
)

// system is one contender: how to configure, start and ask one member, at one setting.
type system interface {
	name() string    // the row name: ours, ours-dledger, etcd, zookeeper
	setting() string // the timings in words, for the table
	// cycle is the leader's heartbeat period: the kill lands at a random point of it.
	cycle() time.Duration
	// bound is generous: a trial, or a wait for the group to settle, that takes longer failed.
	bound() time.Duration
	portsPerMember() int
	// prepare writes the configuration (keys, config files, myid) for members on ports.
	prepare(dir string, ports [][]int) error
	// command starts member i; the same command restarts it on its existing data dir.
	command(i int) *exec.Cmd
	// probe asks member i who leads, over client (kept-alive connections where the system
	// speaks HTTP).
	probe(ctx context.Context, client *http.Client, i int) (view, error)
}

// view is one member's answer to "who leads?", in the system's own names.
type view struct {
	self     string // the member's own id
	leader   string // the leader it follows or is; "" if it knows none
	term     uint64 // the term of that leader if the system reports one (etcd, ours), else 0
	isLeader bool
}

// quorum is the majority of a group of n.
func quorum(n int) int { return n/2 + 1 }

// agreedLeader reports the leader other than old that at least a quorum of the group (n
// members, counting those that are gone) names in the same term in latest, the members'
// latest answers. It is the end of a failover: a majority can serve again.
func agreedLeader(latest map[int]view, n int, old string) (string, bool) {
	type key struct {
		leader string
		term   uint64
	}
	count := map[key]int{}
	for _, v := range latest {
		if v.leader == "" || v.leader == old {
			continue
		}
		k := key{v.leader, v.term}
		count[k]++
		if count[k] >= quorum(n) {
			return v.leader, true
		}
	}
	return "", false
}

// unanimous reports the leader and its member index if all n members answered, all name the
// same leader in the same term, and exactly one of them is that leader: the steady state a
// trial starts from.
func unanimous(latest map[int]view, n int) (string, int, bool) {
	if len(latest) != n {
		return "", -1, false
	}
	leader, idx := "", -1
	for i, v := range latest {
		if v.isLeader {
			if idx >= 0 || v.self != v.leader {
				return "", -1, false
			}
			leader, idx = v.self, i
		}
	}
	if idx < 0 {
		return "", -1, false
	}
	for _, v := range latest {
		if v.leader != leader || v.term != latest[idx].term {
			return "", -1, false
		}
	}
	return leader, idx, true
}
