//go:build unix

package main

import (
	"io"
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
			if mode == "trace" { // where the goroutines wait, which a CPU profile cannot show
				recordFor(log, prefix+"-trace.out", n, trace.Start, trace.Stop)
				continue
			}
			recordFor(log, prefix+"-cpu.pprof", n, pprof.StartCPUProfile, pprof.StopCPUProfile)
		}
	}()
}

// recordFor records the next n ms into a new file at path with start and stop (a CPU profile,
// an execution trace).
func recordFor(log *zap.Logger, path string, n int, start func(io.Writer) error, stop func()) {
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err == nil {
			time.Sleep(time.Duration(n) * time.Millisecond)
			stop()
		}
		_ = f.Close()
	}
	if err != nil {
		log.Warn("not recording", zap.String("file", path), zap.Error(err))
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
