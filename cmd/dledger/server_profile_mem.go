package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strconv"
	"time"
)

// The memory half of DLEDGERPPROF (server_profile.go): where a host's RSS goes over its first
// SECONDS, sampled every memSampleEvery into DIR/<pid>-mem.tsv, one line a sample, and its peak
// per column in a last line starting "peak". Issue 29 asks for a host's RSS at 10,000 groups,
// and a single RSS at the end of a bench run does not say whether it is the settled live heap,
// the heap GOGC lets grow above it, the cold start's peak left mapped, or the runtime's own
// memory (goroutine stacks, GC metadata): this says, per sample, from runtime/metrics (which
// reads without stopping the world; a sample costs a few microseconds).

// memSampleEvery is the sampling period: short enough to catch a cold start's peak heap within
// a collection cycle or two, long enough to cost nothing measurable.
const memSampleEvery = 250 * time.Millisecond

// memColumns are the sampled series, in the file's column order after t_s and rss; each is a
// runtime/metrics name or a sum of them. live is the heap marked live by the last collection.
var memColumns = []struct {
	name    string
	metrics []string
}{
	{"live", []string{"/gc/heap/live:bytes"}},
	{"goal", []string{"/gc/heap/goal:bytes"}},
	{"objects", []string{"/memory/classes/heap/objects:bytes"}},
	{"heap_unused", []string{"/memory/classes/heap/unused:bytes"}},
	{"heap_free", []string{"/memory/classes/heap/free:bytes"}},
	{"heap_released", []string{"/memory/classes/heap/released:bytes"}},
	{"stacks", []string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{"gc_meta", []string{"/memory/classes/metadata/other:bytes", "/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/metadata/mcache/free:bytes", "/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/mspan/free:bytes"}},
	{"other", []string{"/memory/classes/other:bytes", "/memory/classes/profiling/buckets:bytes"}},
	{"total", []string{"/memory/classes/total:bytes"}},
	{"goroutines", []string{"/sched/goroutines:goroutines"}},
	{"gc_cycles", []string{"/gc/cycles/total:gc-cycles"}},
	{"allocs", []string{"/gc/heap/allocs:bytes"}},
}

// memSampler reads memColumns and the process's RSS.
type memSampler struct {
	samples []metrics.Sample
	index   [][]int // per column, its samples
	peak    []uint64
}

func newMemSampler() *memSampler {
	m := &memSampler{index: make([][]int, len(memColumns)), peak: make([]uint64, len(memColumns)+1)}
	for c, col := range memColumns {
		for _, name := range col.metrics {
			m.index[c] = append(m.index[c], len(m.samples))
			m.samples = append(m.samples, metrics.Sample{Name: name})
		}
	}
	return m
}

// header is the file's first line.
func (m *memSampler) header() string {
	h := "t_s\trss"
	for _, col := range memColumns {
		h += "\t" + col.name
	}
	return h + "\n"
}

// sample is one line: seconds since start, then the values in bytes (counts for goroutines and
// gc_cycles); a metric this Go does not know reads 0.
func (m *memSampler) sample(since time.Duration, rss uint64) string {
	metrics.Read(m.samples)
	line := strconv.FormatFloat(since.Seconds(), 'f', 2, 64) + "\t" + strconv.FormatUint(rss, 10)
	m.peak[0] = max(m.peak[0], rss)
	for c, idx := range m.index {
		var v uint64
		for _, i := range idx {
			if m.samples[i].Value.Kind() == metrics.KindUint64 {
				v += m.samples[i].Value.Uint64()
			}
		}
		m.peak[c+1] = max(m.peak[c+1], v)
		line += "\t" + strconv.FormatUint(v, 10)
	}
	return line + "\n"
}

// peakLine is the largest value each column took.
func (m *memSampler) peakLine() string {
	line := "peak"
	for _, p := range m.peak {
		line += "\t" + strconv.FormatUint(p, 10)
	}
	return line + "\n"
}

// sampleMemory writes a sample every memSampleEvery to w until done is closed, then the peak line.
func sampleMemory(w io.Writer, done <-chan struct{}) error {
	m := newMemSampler()
	b := bufio.NewWriter(w)
	start := time.Now()
	t := time.NewTicker(memSampleEvery)
	defer t.Stop()
	_, _ = b.WriteString(m.header())
	for {
		_, _ = b.WriteString(m.sample(time.Since(start), readRSS()))
		select {
		case <-done:
			_, _ = b.WriteString(m.peakLine())
			return b.Flush()
		case <-t.C:
		}
	}
}

// readRSS is the process's resident set in bytes (VmRSS of /proc/self/status), 0 where there
// is none.
func readRSS() uint64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(s) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			var kib uint64
			if _, err := fmt.Sscan(string(v), &kib); err == nil {
				return kib << 10
			}
		}
	}
	return 0
}
