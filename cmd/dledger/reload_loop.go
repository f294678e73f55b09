package main

import (
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server"
)

// catchHangUp starts catching SIGHUP, before anything else of the server runs: SIGHUP's
// default action ends the process, and a SIGHUP sent as soon as the member serves (a config
// management tool, a test) must reload, not kill it. Signals that arrive before
// reloadOnHangUp wait in the channel (one is enough: a reload reads the newest files).
func catchHangUp() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// reloadOnHangUp runs every reloader, in order, on each SIGHUP caught on hup (catchHangUp)
// until stop is called (which waits for a pass in progress and stops catching SIGHUP).
func reloadOnHangUp(log *zap.Logger, hup chan os.Signal, reloaders []reloader) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-hup:
				runReloaders(log, reloaders)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}

// runReloaders is one SIGHUP's pass: each reloader in order, each failure logged with its
// reason (the old files stay in use) and none stopping the others.
func runReloaders(log *zap.Logger, reloaders []reloader) {
	if len(reloaders) == 0 {
		log.Info("SIGHUP: nothing to reload")
	}
	for _, r := range reloaders {
		if err := r.reload(); err != nil {
			log.Error("reload failed; keeping what was loaded before", zap.String("what", r.name), zap.Error(err))
			continue
		}
		log.Info("reloaded", zap.String("what", r.name))
	}
}

// peerKeysReloader re-reads --member-key-file and --trust-file into the running host (every
// member's connections whose key the new trust list revokes are closed; the others stay).
func peerKeysReloader(keyFile, trustFile string, h *server.Host) reloader {
	return reloader{name: "peer keys (" + keyFile + ", " + trustFile + ")", reload: func() error {
		key, err := secure.LoadStaticKeyFile(keyFile)
		if err != nil {
			return err
		}
		trust, err := secure.LoadTrustFile(trustFile)
		if err != nil {
			return err
		}
		_, err = h.ReloadPeerKeys(key, trust)
		return err
	}}
}
