//go:build unix

package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// cpuSigEnv: with DLEDGERCPUSIG=DIR,MILLISECONDS in its environment a server writes a CPU
// profile of the MILLISECONDS after each SIGUSR2 it receives, to DIR/<pid>-sig<N>-cpu.pprof.
// For diagnosis only: a tool that watches the hosts of `dledger bench groups` signals the
// survivors the moment a host is killed, so the profile covers the crash's elections and not
// the idle before nor the rejoin after (issue 29: CPU per election).
const cpuSigEnv = "DLEDGERCPUSIG"

func startSignalProfiles(log *zap.Logger) {
	v := os.Getenv(cpuSigEnv)
	if v == "" {
		return
	}
	dir, ms, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(ms)
	if err != nil || n <= 0 || dir == "" {
		log.Warn("DLEDGERCPUSIG wants DIR,MILLISECONDS; not profiling", zap.String("value", v))
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for i := 0; ; i++ {
			<-ch
			path := filepath.Join(dir, strconv.Itoa(os.Getpid())+"-sig"+strconv.Itoa(i)+"-cpu.pprof")
			f, err := os.Create(path)
			if err == nil {
				if err = pprof.StartCPUProfile(f); err == nil {
					time.Sleep(time.Duration(n) * time.Millisecond)
					pprof.StopCPUProfile()
				}
				_ = f.Close()
			}
			if err != nil {
				log.Warn("not profiling", zap.Error(err))
			}
		}
	}()
}
