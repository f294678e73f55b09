// Command dledger-broker is the reference broker: one member of a replicated append-only log
// whose leader is elected by an embedded dledger member (package server). See
// docs/broker.md; the log and replication logic is package broker beside this file.
//
//	dledger-broker --id n0 --peers 'n0-127.0.0.1:20911;n1-...' \
//	    --brokers 'n0=127.0.0.1:8080,n1=...' --dir /var/lib/broker/n0 --insecure
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/cmd/dledger-broker/broker"
	"github.com/dledger-go/dledger/server"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dledger-broker:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("dledger-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "this member's id, one of --peers")
	group := fs.String("group", "broker", "replica group name")
	peers := fs.String("peers", "", "election members: 'n0-host:port;n1-host:port;...'")
	brokers := fs.String("brokers", "", "broker HTTP addresses: 'n0=host:port,n1=host:port,...'")
	dir := fs.String("dir", "", "data dir (the log, and the election member's state)")
	keyFile := fs.String("key-file", "", "group key file (dledger keygen FILE)")
	insecure := fs.Bool("insecure", false, "no peer authentication (trusted network only)")
	heartbeat := fs.Duration("heartbeat", 0, "election heartbeat interval (0: the lan profile's)")
	ignoreLedger := fs.Bool("unsafe-ignore-ledger", false, "TEST ONLY: report an empty ledger (loses acknowledged appends)")
	debugFaults := fs.Bool("debug-faults", false, "TEST ONLY: serve POST /debug/fault (drop or delay replication)")
	stallLimit := fs.Duration("stall-limit", time.Second, "a log write taking longer makes the member abstain (storage unhealthy)")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addrs := map[string]string{}
	for _, kv := range strings.Split(*brokers, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("--brokers: want id=host:port,..., got %q", kv)
		}
		addrs[k] = v
	}
	if addrs[*id] == "" || *dir == "" {
		return errors.New("--id must be one of --brokers, and --dir is required")
	}
	var keys server.KeySet
	if *keyFile != "" {
		var err error
		if keys, err = server.LoadKeyFile(*keyFile); err != nil {
			return err
		}
	}
	zc := zap.NewProductionConfig()
	if *verbose {
		zc.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	}
	logger, err := zc.Build()
	if err != nil {
		return err
	}
	defer logger.Sync()
	logger = logger.With(zap.String("member", *id))

	b, err := broker.New(broker.Config{
		Election: server.Config{Group: *group, SelfID: *id, Peers: *peers, Keys: keys, Insecure: *insecure,
			DataDir: filepath.Join(*dir, "election"), Election: server.Timings{HeartBeatInterval: *heartbeat}},
		Dir: filepath.Join(*dir, "log"), Brokers: addrs, IgnoreLedger: *ignoreLedger, Faults: *debugFaults, StallLimit: *stallLimit, Logger: logger,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addrs[*id])
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	if err := b.Start(); err != nil {
		return err
	}
	logger.Info("serving", zap.String("http", ln.Addr().String()), zap.Bool("ignoreLedger", *ignoreLedger))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), b.Server().StopTimeout())
	defer cancel()
	err = b.Stop(ctx)
	hs.Close()
	return err
}
