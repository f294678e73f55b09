package main

// Profiles of a server process, for diagnosis only: with DLEDGERPPROF=DIR,SECONDS in its
// environment (not a DLEDGER_ setting: nothing a deployment configures), a server writes a CPU
// profile of its first SECONDS and, at their end, its mutex and block profiles, a goroutine
// dump and a heap profile (after a collection: the live heap by owner), to
// DIR/<pid>-{cpu,mutex,block,goroutine,heap}.pprof, and its memory every 250 ms over those
// SECONDS to DIR/<pid>-mem.tsv (server_profile_mem.go). DIR,SECONDS,FROM also writes a heap
// profile at FROM seconds (<pid>-heap-from.pprof), the base for what a window allocated
// (`go tool pprof -sample_index=alloc_space -base`: a settled host's allocations while idle). `dledger bench groups` starts its hosts
// with its own environment, so a cold start's three hosts can be profiled without an admin
// endpoint (issue 29: where a mass election's time and waits go; BENCHMARKS.md).

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// profileEnv names the variable; blockRate samples blocking events of about 10 us and more
// (shorter ones in proportion), which keeps the block profile's own cost small.
const (
	profileEnv = "DLEDGERPPROF"
	cpuFromEnv = "DLEDGERCPUFROM"
	cpuOnlyEnv = "DLEDGERCPUONLY"
	blockRate  = 10_000
	// memProfileRate samples an allocation of about every 4 KiB for the heap profile.
	memProfileRate = 4096
)

// earlyCPU is the CPU profile runServer starts before it reads the settings (startEarlyCPU),
// so that a host's start is profiled from its first step: parsing a config file of 10,000
// members is a tenth of a second of a cold start (issue 29).
var earlyCPU struct {
	f   *os.File
	err error
}

// startEarlyCPU starts the CPU profile DLEDGERPPROF asks for from the process's start, unless
// DLEDGERCPUFROM delays it; what goes wrong is logged later by startProfiles.
func startEarlyCPU() {
	v := os.Getenv(profileEnv)
	if v == "" {
		return
	}
	dir, n, _, err := parseProfileEnv(v)
	if err != nil {
		return // startProfiles says why
	}
	if from, _ := strconv.Atoi(os.Getenv(cpuFromEnv)); from > 0 && from < n {
		return
	}
	f, err := os.Create(filepath.Join(dir, strconv.Itoa(os.Getpid())) + "-cpu.pprof")
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	earlyCPU.f, earlyCPU.err = f, err
}

// startProfiles starts the profiles DLEDGERPPROF asks for, if any; a value it cannot use is
// logged and ignored (a diagnosis must not stop a server). With DLEDGERCPUONLY=1 it makes the
// CPU profile alone: the heap, mutex and block profiles' sampling costs a cold start of 10,000
// groups about a third more CPU, which a profile of where its CPU goes should not count.
func startProfiles(log *zap.Logger) {
	v := os.Getenv(profileEnv)
	if v == "" {
		return
	}
	dir, n, heapFrom, err := parseProfileEnv(v)
	if err != nil {
		log.Warn("DLEDGERPPROF wants DIR,SECONDS[,FROM]; not profiling", zap.String("value", v), zap.Error(err))
		return
	}
	prefix := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	cpu, ok := startCPUProfile(log, prefix, n)
	if !ok {
		return
	}
	if os.Getenv(cpuOnlyEnv) == "1" {
		time.AfterFunc(time.Duration(n)*time.Second, func() {
			pprof.StopCPUProfile()
			_ = cpu.Close()
			log.Info("profiles written", zap.String("prefix", prefix))
		})
		return
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(blockRate)
	memDone, memWritten := make(chan struct{}), make(chan struct{})
	if mem, err := os.Create(prefix + "-mem.tsv"); err != nil {
		log.Warn("memory not sampled", zap.Error(err))
		close(memWritten)
	} else {
		go func() {
			defer close(memWritten)
			if err := sampleMemory(mem, memDone); err != nil {
				log.Warn("memory samples not written", zap.Error(err))
			}
			_ = mem.Close()
		}()
	}
	if heapFrom > 0 { // what was allocated from FROM to SECONDS: pprof -base <pid>-heap-from.pprof
		time.AfterFunc(time.Duration(heapFrom)*time.Second, func() {
			runtime.GC()
			if err := writeProfile("heap", prefix+"-heap-from.pprof"); err != nil {
				log.Warn("profile not written", zap.String("profile", "heap-from"), zap.Error(err))
			}
		})
	}
	time.AfterFunc(time.Duration(n)*time.Second, func() {
		pprof.StopCPUProfile()
		_ = cpu.Close()
		close(memDone)
		<-memWritten
		runtime.GC() // the heap profile is as of the last collection: make it now
		for _, p := range []string{"mutex", "block", "goroutine", "heap"} {
			if err := writeProfile(p, prefix+"-"+p+".pprof"); err != nil {
				log.Warn("profile not written", zap.String("profile", p), zap.Error(err))
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		log.Info("profiles written", zap.String("prefix", prefix))
	})
}

// startCPUProfile has the CPU profile run: startEarlyCPU's, or one started now, or
// DLEDGERCPUFROM seconds after the process's start, which leaves MemProfileRate alone (it
// inflates CPU and heap), so that it covers a window of interest (a 10,000-group crash at about
// 27 s: DLEDGERCPUFROM=23 DLEDGERPPROF=DIR,33). Else, without DLEDGERCPUONLY, it samples
// allocations finely from now on.
func startCPUProfile(log *zap.Logger, prefix string, n int) (*os.File, bool) {
	cpu, err := earlyCPU.f, earlyCPU.err
	delayed := false
	if cpu == nil && err == nil {
		cpu, err = os.Create(prefix + "-cpu.pprof")
		delayed = true
	}
	if err != nil {
		log.Warn("not profiling", zap.Error(err))
		return nil, false
	}
	from, _ := strconv.Atoi(os.Getenv(cpuFromEnv))
	switch {
	case delayed && from > 0 && from < n:
		time.AfterFunc(time.Duration(from)*time.Second, func() {
			if err := pprof.StartCPUProfile(cpu); err != nil {
				log.Warn("not profiling", zap.Error(err))
			}
		})
		return cpu, true
	case delayed: // startEarlyCPU did not run
		if err := pprof.StartCPUProfile(cpu); err != nil {
			log.Warn("not profiling", zap.Error(err))
			return nil, false
		}
	}
	if os.Getenv(cpuOnlyEnv) != "1" {
		// Before the members are made: a heap profile sampled every 512 KiB (the default)
		// cannot tell apart the few hundred bytes each of 10,000 members keeps.
		runtime.MemProfileRate = memProfileRate
	}
	return cpu, true
}

// parseProfileEnv reads DIR,SECONDS[,FROM]: FROM (0 when absent) within (0, SECONDS).
func parseProfileEnv(v string) (dir string, secs, from int, err error) {
	dir, rest, _ := strings.Cut(v, ",")
	s, f, hasFrom := strings.Cut(rest, ",")
	if secs, err = strconv.Atoi(s); err == nil && (secs <= 0 || dir == "") {
		err = fmt.Errorf("no DIR or SECONDS %d not positive", secs)
	}
	if err == nil && hasFrom {
		if from, err = strconv.Atoi(f); err == nil && (from <= 0 || from >= secs) {
			err = fmt.Errorf("FROM %d not within (0, %d)", from, secs)
		}
	}
	return dir, secs, from, err
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p := pprof.Lookup(name)
	if p == nil {
		return fmt.Errorf("no profile %s", name)
	}
	return p.WriteTo(f, 0)
}
