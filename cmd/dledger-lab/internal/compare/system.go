package compare

import (
	"context"
	"net/http"
	"os/exec"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
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

// harness is the view in the shared predicates' terms: a member that does not lead follows
// (etcd's and ZooKeeper's answers have no other roles; ours is judged the same way here).
func (v view) harness() harness.View {
	return harness.View{Self: v.self, Leader: harness.Leader{ID: v.leader, Term: int64(v.term)},
		IsLeader: v.isLeader, Follows: !v.isLeader}
}

// agreedLeader reports the leader other than old that at least a quorum of the group (n
// members, counting those that are gone) names in the same term in latest, the members'
// latest answers (harness.QuorumLeader).
func agreedLeader(latest map[int]view, n int, old string) (string, bool) {
	k, ok := harness.QuorumLeader(latest, n, view.harness, func(k harness.Leader) bool { return k.ID == old })
	return k.ID, ok
}

// unanimous reports the leader and its member index if all n members answered, all name the
// same leader in the same term, and exactly one of them is that leader (harness.Unanimous).
func unanimous(latest map[int]view, n int) (string, int, bool) {
	k, i, ok := harness.Unanimous(latest, n, view.harness)
	return k.ID, i, ok
}
