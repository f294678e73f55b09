package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
)

// broker stands for a storage broker that embeds the elector: it accepts writes only while it
// leads, stamps them with the term (the fencing token), and reports its ledger end.
type broker struct {
	leaderTerm atomic.Int64 // -1 while not leader
	srv        *server.Server
}

func (b *broker) onRoleChange(ev dledger.RoleEvent) {
	if ev.Role == protocol.LEADER {
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

	// The group key every member shares. A broker loads it from a file that `dledger keygen`
	// wrote (secure.LoadKeyFile); this example writes one.
	key, _ := secure.GenerateKey()
	_ = secure.WriteKeyFile(dir+"/group.key", key)
	keys, err := secure.LoadKeyFile(dir + "/group.key")
	if err != nil {
		fmt.Println(err)
		return
	}

	b := &broker{}
	b.leaderTerm.Store(-1)
	leading := make(chan struct{}, 1)
	srv, err := server.New(server.Config{
		Group:   "broker-a",
		SelfID:  "n0",
		Peers:   "n0-" + addr, // a real group lists 3 or 5 members
		DataDir: dir + "/election",
		Keys:    keys, // peer authentication: required unless Insecure
	}, server.WithListener(func(ev dledger.RoleEvent) {
		b.onRoleChange(ev)
		if ev.Role == protocol.LEADER {
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
	defer srv.Stop(context.Background())

	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		fmt.Println("no leadership")
		return
	}
	fmt.Println("append:", b.append(0))
	st := srv.Status()
	fmt.Println("role:", st.Role, "ledger end index:", st.Ledger.Index)
	// Output:
	// append: <nil>
	// role: LEADER ledger end index: 0
}
