package main

import (
	"context"
	"testing"

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
