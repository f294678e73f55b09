package driver

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// firstVotes records when each group's first vote request left, and counts the groups down.
type firstVotes struct {
	mu    sync.Mutex
	first map[string]time.Time
	left  sync.WaitGroup
}

func (f *firstVotes) SendVote(to string, req *protocol.VoteRequest, done func(*protocol.VoteResponse, error)) {
	f.mu.Lock()
	if _, ok := f.first[req.Group]; !ok {
		f.first[req.Group] = time.Now()
		f.left.Done()
	}
	f.mu.Unlock()
}

func (*firstVotes) SendHeartBeat(string, *protocol.HeartBeatRequest, func(*protocol.HeartBeatResponse, error)) {
}

func (*firstVotes) SendLeadershipTransfer(string, *protocol.LeadershipTransferRequest, func(*protocol.LeadershipTransferResponse, error)) {
}

// BenchmarkMaintainerPeerGoneBurst is a host's crash as its peers' Maintainer sees it (issue
// 29): n electors, n0 of groups g0.., each following n1 with the order of succession "n0;n2"
// (n0 campaigns at once when n1 is gone), driven by one running Maintainer; one goroutine
// calls PeerGone("n1") on each, as a host link's does when the link closes and the redial is
// refused. Each iteration builds fresh electors (timer stopped) and measures, per elector, the
// time from the start of the burst to its first vote request: p50-ms and p99-ms. The
// heartbeat interval is long, so nothing but the burst makes a pass due.
func BenchmarkMaintainerPeerGoneBurst(b *testing.B) {
	for _, n := range []int{334, 3334} {
		b.Run(fmt.Sprintf("electors=%d", n), func(b *testing.B) {
			peers, err := memberstate.ParsePeers("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")
			if err != nil {
				b.Fatal(err)
			}
			cfg := dledger.DefaultConfig()
			cfg.HeartBeatInterval = time.Minute // no follower times out while the electors are built
			var p50s, p99s []float64
			for b.Loop() {
				b.StopTimer()
				tr := &firstVotes{first: map[string]time.Time{}}
				m := NewMaintainer()
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan struct{})
				go func() { m.Run(ctx); close(ran) }()
				es := make([]*dledger.Elector, n)
				for i := range es {
					g := fmt.Sprintf("g%d", i)
					e, err := dledger.New(cfg, dledger.Member{Group: g, SelfID: "n0", Peers: peers, Store: memberstate.NewMemStore()},
						dledger.Options{Clock: WallClock{}, Rand: NewRand(uint64(i + 1)), Transport: tr})
					if err != nil {
						b.Fatal(err)
					}
					hb := &protocol.HeartBeatRequest{Header: protocol.Header{Group: g, RemoteID: "n0", LocalID: "n1", LeaderID: "n1", Term: 1},
						Successors: "n0;n2"}
					if r := e.HandleHeartBeat(hb); r.Code != protocol.CodeSuccess {
						b.Fatalf("heartbeat answered %v", r.Code)
					}
					m.Add(e, nopPublisher{})
					es[i] = e
				}
				tr.left.Add(n)
				b.StartTimer()
				start := time.Now()
				for _, e := range es {
					e.PeerGone("n1")
				}
				tr.left.Wait()
				b.StopTimer()
				lat := make([]float64, 0, n)
				for _, at := range tr.first {
					lat = append(lat, float64(at.Sub(start).Microseconds())/1000)
				}
				slices.Sort(lat)
				p50s, p99s = append(p50s, lat[n/2]), append(p99s, lat[n*99/100])
				cancel()
				<-ran
				b.StartTimer()
			}
			slices.Sort(p50s)
			slices.Sort(p99s)
			b.ReportMetric(p50s[len(p50s)/2], "p50-ms")
			b.ReportMetric(p99s[len(p99s)/2], "p99-ms")
		})
	}
}
