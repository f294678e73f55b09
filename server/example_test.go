package server_test

// The example needs this module's server package only: role events, roles, status, errors
// and keys are all reachable from it.
import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/dledger-go/dledger/server"
)

// broker stands for a storage broker that embeds the elector: it accepts writes only while it
// leads, stamps them with the term (the fencing token), and reports its ledger end.
type broker struct {
	leaderTerm atomic.Int64 // -1 while not leader
	srv        *server.Server
}

func (b *broker) onRoleChange(ev server.RoleEvent) {
	if ev.Role == server.Leader {
		b.leaderTerm.Store(ev.Term) // start accepting writes stamped with ev.Term
	} else {
		b.leaderTerm.Store(-1) // fence at once: losing leadership is announced as it happens
	}
}

func (b *broker) append(entryIndex int64) error {
	term := b.leaderTerm.Load()
	if term < 0 {
		return fmt.Errorf("not leader")
	}
	// ... write the entry with term as its fencing token, then report the new ledger end:
	return b.srv.UpdateLedger(term, entryIndex)
}

func Example_embeddedBroker() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // a free port for this one-member example
	addr := ln.Addr().String()
	ln.Close()
	dir, _ := os.MkdirTemp("", "broker-")
	defer os.RemoveAll(dir)

	b := &broker{}
	b.leaderTerm.Store(-1)
	leading := make(chan struct{}, 1)
	srv, err := server.New(server.Config{
		Group:   "broker-a",
		SelfID:  "n0",
		Peers:   "n0-" + addr, // a real group lists 3 or 5 members
		DataDir: dir + "/election",
		// Peer authentication with the group key `dledger keygen FILE` wrote is required unless
		// Insecure: a real member sets Keys from server.LoadKeyFile(FILE). This example's one
		// member has no peer to authenticate.
		Insecure: true,
	}, server.WithListener(func(ev server.RoleEvent) {
		b.onRoleChange(ev)
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
	b.srv = srv
	if err := srv.UpdateLedger(-1, -1); err != nil { // an empty ledger; report the real end on restart
		fmt.Println(err)
		return
	}
	if err := srv.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop(context.Background()) // on the early returns; a second Stop returns the first's result

	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		fmt.Println("no leadership")
		return
	}
	fmt.Println("append:", b.append(0))
	st := srv.Status()
	fmt.Println("role:", st.Role, "ledger end index:", st.Ledger.Index)

	// Every refused transfer is an error that errors.Is understands.
	_, err = srv.TransferLeadership(context.Background(), "n9")
	fmt.Println("refused:", errors.Is(err, server.ErrTransferRefused), "unknown member:", errors.Is(err, server.ErrUnknownMember))

	ctx, cancel := context.WithTimeout(context.Background(), srv.StopTimeout())
	defer cancel()
	fmt.Println("stop:", srv.Stop(ctx))
	// Output:
	// append: <nil>
	// role: LEADER ledger end index: 0
	// refused: true unknown member: true
	// stop: <nil>
}
