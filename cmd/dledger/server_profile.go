package main

// Profiles of a server process, for diagnosis only: with DLEDGERPPROF=DIR,SECONDS in its
// environment (not a DLEDGER_ setting: nothing a deployment configures), a server writes a CPU
// profile of its first SECONDS and, at their end, its mutex and block profiles and a goroutine
// dump, to DIR/<pid>-{cpu,mutex,block,goroutine}.pprof. `dledger bench groups` starts its hosts
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
	blockRate  = 10_000
)

// startProfiles starts the profiles DLEDGERPPROF asks for, if any; a value it cannot use is
// logged and ignored (a diagnosis must not stop a server).
func startProfiles(log *zap.Logger) {
	v := os.Getenv(profileEnv)
	if v == "" {
		return
	}
	dir, secs, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(secs)
	if err != nil || n <= 0 || dir == "" {
		log.Warn("DLEDGERPPROF wants DIR,SECONDS; not profiling", zap.String("value", v))
		return
	}
	prefix := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	cpu, err := os.Create(prefix + "-cpu.pprof")
	if err == nil {
		err = pprof.StartCPUProfile(cpu)
	}
	if err != nil {
		log.Warn("not profiling", zap.Error(err))
		return
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(blockRate)
	time.AfterFunc(time.Duration(n)*time.Second, func() {
		pprof.StopCPUProfile()
		_ = cpu.Close()
		for _, p := range []string{"mutex", "block", "goroutine"} {
			if err := writeProfile(p, prefix+"-"+p+".pprof"); err != nil {
				log.Warn("profile not written", zap.String("profile", p), zap.Error(err))
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		log.Info("profiles written", zap.String("prefix", prefix))
	})
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
