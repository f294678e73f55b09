package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/dledger-go/dledger/server"
)

// A storage that must catch up before it serves as leader holds the ready gate, and scopes
// its leader work to the leadership: the context ends before any listener hears of the loss.
func ExampleServer_LeadershipContext() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // a free port for this one-member example
	addr := ln.Addr().String()
	ln.Close()
	dir, _ := os.MkdirTemp("", "fencing-")
	defer os.RemoveAll(dir)

	leading := make(chan struct{}, 1)
	srv, err := server.New(server.Config{Group: "broker-a", SelfID: "n0", Peers: "n0-" + addr,
		DataDir: dir, Insecure: true, Ledger: server.LedgerNone, // a real member sets Keys (server.LoadKeyFile)
		LeaderReadyGate: true, // /v1/leader says 503 until SetLeaderReady
	}, server.WithListener(func(ev server.RoleEvent) {
		if ev.Role == server.Leader {
			select {
			case leading <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := srv.Start(); err != nil {
		fmt.Println(err)
		return
	}
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		fmt.Println("no leadership")
		return
	}

	ctx, term, ok := srv.LeadershipContext(context.Background())
	fmt.Println("leading:", ok, srv.IsLeader())
	// ... replay the commit log up to its end, under ctx, then open the gate for this term:
	fmt.Println("ready:", srv.SetLeaderReady(term), srv.LeaderReady())
	// ... serve writes stamped with term while ctx lives.

	srv.Stop(context.Background()) // a one-member group hands over to nobody: leadership ends
	<-ctx.Done()
	fmt.Println("fenced:", errors.Is(context.Cause(ctx), server.ErrLeadershipLost), srv.IsLeader())
	// Output:
	// leading: true true
	// ready: <nil> true
	// fenced: true false
}
