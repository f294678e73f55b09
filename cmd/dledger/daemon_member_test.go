package main

import (
	"context"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
)

// daemonMember builds member c with an admin API of its own (dc), as a process of one member
// has it: the daemon listens and serves; the member is built, not started. Cleanup stops both.
func daemonMember(t testing.TB, c server.Config, dc daemon.Config) (*server.Server, *daemon.Daemon) {
	t.Helper()
	d, err := daemon.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(c, server.WithAttacher(d.Attacher()))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		s.Stop(context.Background())
		t.Fatal(err)
	}
	d.Serve()
	t.Cleanup(func() {
		s.Stop(context.Background())
		d.Stop(context.Background())
	})
	return s, d
}

// calmElection is the election timing of this package's in-process groups, whose tests read the
// leader once and then talk to it (transfers through its admin API, a load balancer's view of
// it): a 1 s heartbeat interval with a leak of 3 (server's calmTimings). It used to be 100 ms
// with a leak of 30, calm before adaptive failure detection (docs/protocol.md 14); since, a
// member of its own process times out its leader at the largest heartbeat gap it measured plus
// max(60 ms, 4 sd), and StallThreshold is half the interval, so under -race on a loaded 2-core
// machine a 100 ms group changed leader within seconds of a calm election (server's
// TestForgedRequestsFromOutsideAreRefused failed 13 of 30 runs so, dcdb54a). At 1 s the margins
// are 500 ms; elections are no slower: the vote intervals stay short.
func calmElection() dledger.Config {
	c := dledger.DefaultConfig()
	c.HeartBeatInterval, c.MaxHeartBeatLeak = time.Second, 3
	c.MinVoteInterval, c.MaxVoteInterval, c.VoteRoundBase = 50*time.Millisecond, 150*time.Millisecond, 200*time.Millisecond
	return c
}
