package driver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// nopPublisher drops events.
type nopPublisher struct{}

func (nopPublisher) Publish([]dledger.RoleEvent) {}

// BenchmarkMaintainerAlarmsContended: many goroutines (as a host's rpc workers answering votes
// do, each holding its elector's lock) call the pass and events alarms of 2,000 electors on
// one running maintainer. Issue 29: when the alarms took the maintainer's one mutex, this is
// where a cold start of thousands of groups queued. ns/op is one pass alarm and one events
// alarm; compare with the parent commit's maintainer (same benchmark, eventsReady for the
// events alarm).
func BenchmarkMaintainerAlarmsContended(b *testing.B) {
	const n = 2000
	m := NewMaintainer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	ds := make([]*driven, n)
	for i := range ds {
		e := soloElector(b, fmt.Sprintf("g%d", i))
		ds[i] = addDriven(m, e)
	}
	var next atomic.Int64
	base := time.Now().Add(time.Hour)
	b.SetParallelism(32) // 32 per core: many more callers than cores, as on a host
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			d := ds[i%n]
			m.plan(d, base.Add(time.Duration(i%997)*time.Millisecond))
			m.schedule(d, wantPublish)
		}
	})
	b.StopTimer()
	cancel()
	<-done
}
