package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// BenchmarkHostOnlyElectionEvents: what a host's survivor of a crash does per member of a group
// the dead host led, in the metrics (a host-only member, as `dledger server` runs a host of
// many groups): a vote round decided and its role events, candidate then leader or follower.
// Members taken in turn over 10,000, as the crash touches them.
func BenchmarkHostOnlyElectionEvents(b *testing.B) {
	h, err := NewHost(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	ms := make([]*Metrics, n)
	at := time.Unix(1e9, 0)
	for i := range ms {
		ms[i] = NewHostOnly(h, func() time.Time { return at })
		ms[i].OnRoleEvent(dledger.RoleEvent{Role: protocol.FOLLOWER, Term: 1, LeaderID: "n1", At: at})
	}
	b.ResetTimer()
	for i := range b.N {
		m := ms[i%n]
		term := int64(2 + i/n)
		m.OnRoleEvent(dledger.RoleEvent{Role: protocol.CANDIDATE, Term: term, At: at})
		m.VoteRoundDecided(protocol.Passed)
		if i%2 == 0 {
			m.OnRoleEvent(dledger.RoleEvent{Role: protocol.LEADER, Term: term, LeaderID: "n0", At: at})
		} else {
			m.OnRoleEvent(dledger.RoleEvent{Role: protocol.FOLLOWER, Term: term, LeaderID: "n2", At: at})
		}
	}
}
