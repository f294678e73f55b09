//go:build unix

package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
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
// the idle before nor the rejoin after (issue 29: CPU per election). DIR,MILLISECONDS,alloc
// writes heap profiles around the window instead, DIR,MILLISECONDS,trace an execution trace of it.
const cpuSigEnv = "DLEDGERCPUSIG"

func startSignalProfiles(log *zap.Logger) {
	v := os.Getenv(cpuSigEnv)
	if v == "" {
		return
	}
	dir, ms, _ := strings.Cut(v, ",")
	ms, mode, _ := strings.Cut(ms, ",")
	n, err := strconv.Atoi(ms)
	if err != nil || n <= 0 || dir == "" {
		log.Warn("DLEDGERCPUSIG wants DIR,MILLISECONDS[,alloc|trace]; not profiling", zap.String("value", v))
		return
	}
	if mode == "alloc" {
		runtime.MemProfileRate = memProfileRate
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for i := 0; ; i++ {
			<-ch
			prefix := filepath.Join(dir, strconv.Itoa(os.Getpid())+"-sig"+strconv.Itoa(i))
			if mode == "alloc" {
				heapAround(log, prefix, n)
				continue
			}
			if mode == "trace" {
				traceFor(log, prefix, n)
				continue
			}
			f, err := os.Create(prefix + "-cpu.pprof")
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

// traceFor writes an execution trace of the next n ms (runtime/trace) to prefix-trace.out: where
// the goroutines wait, which a CPU profile cannot show.
func traceFor(log *zap.Logger, prefix string, n int) {
	f, err := os.Create(prefix + "-trace.out")
	if err == nil {
		if err = trace.Start(f); err == nil {
			time.Sleep(time.Duration(n) * time.Millisecond)
			trace.Stop()
		}
		_ = f.Close()
	}
	if err != nil {
		log.Warn("not tracing", zap.Error(err))
	}
}

// heapAround writes the heap profiles before and after a window of n ms (startSignalProfiles).
func heapAround(log *zap.Logger, prefix string, n int) {
	for k, wait := range []int{0, n} {
		time.Sleep(time.Duration(wait) * time.Millisecond)
		runtime.GC()
		if err := writeProfile("heap", prefix+"-heap"+strconv.Itoa(k)+".pprof"); err != nil {
			log.Warn("profile not written", zap.Error(err))
		}
	}
}
