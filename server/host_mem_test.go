package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
)

// memSample is the heap in use (after a GC) and the goroutines at one point.
type memSample struct {
	heap       uint64
	goroutines int
}

func heapNow() memSample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// memHosts is three hosts in this process, each a member of every one of warm + groups
// groups, as `dledger server --config` builds them for thousands of groups: lan profile, a
// production logger (JSON; at error, see below), no per-member series. It returns the heap and goroutines
// once the first warm groups have a leader (the hosts' links and tables exist) and once every
// group has one, settle later: the difference is what the groups added cost.
func memHosts(t testing.TB, warm, groups int, settle time.Duration) (before, after memSample, stop func()) {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	// At error, not info: an rpc link's sampled logger (zap's sampler, 448 KiB) is made by
	// its first warning (rpc/observe.go), and a warning under load between the two samples
	// (calls timed out on a loaded machine) read as 1.5 KiB a member for each link that warned
	// (14,423 B a member once in 20 -race runs, against 4,600-4,950 in the others). A sampler
	// is the host's, not a member's; nothing a member keeps depends on the level.
	log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zap.ErrorLevel))
	ports := dledgertest.FreePorts(t, 3)
	var hosts []*Host
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, h := range hosts {
			h.Stop(ctx)
		}
	}
	for _, p := range ports {
		h, err := NewHost(HostConfig{Listen: fmt.Sprintf("127.0.0.1:%d", p), DataDir: t.TempDir(), Keys: testKeys},
			WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	peers := dledgertest.PeersString(ports)
	add := func(from, to int) {
		members := make([][]*Server, to-from)
		for g := from; g < to; g++ {
			name := fmt.Sprintf("g%05d", g)
			for i, h := range hosts {
				s, err := h.AddGroup(Config{Group: name, SelfID: fmt.Sprintf("n%d", i), Peers: peers, Election: dledger.DefaultConfig()},
					WithoutMemberSeries())
				if err != nil {
					t.Fatal(err)
				}
				if err := s.UpdateLedger(-1, -1); err != nil {
					t.Fatal(err)
				}
				if err := s.Start(); err != nil {
					t.Fatal(err)
				}
				members[g-from] = append(members[g-from], s)
			}
		}
		// Every member follows its group's leader (not a quorum only): a third member still
		// campaigning is work in flight, not what a member costs.
		for _, ms := range members {
			dledgertest.Eventually(t, 3*time.Minute, "every member follows one leader", func() bool {
				v := groupView(ms, func(*Server) bool { return false })
				id, term, ok := dledgertest.StableLeader(v, len(v))
				for _, m := range v {
					ok = ok && m.LeaderID == id && m.Term == term
				}
				return ok
			})
		}
	}
	add(0, warm)
	before = settledHeap(settle)
	add(warm, warm+groups)
	after = settledHeap(settle)
	return before, after, stop
}

// settledHeap is the least heap of five samples taken settle apart (a measurement of the
// settled state, not a check of one). Work still in flight when the last group elects only ever
// adds to a sample: on a loaded machine (-race, two CPU burners, -count=10) a single sample
// taken settle after the last election read 8,122, 68,660 and 130,621 B a member (18 goroutines
// more than settled, the election's last rounds and the frames they queue), against 6,590-7,472
// in the other runs; a member's own cost is in every sample, so the least still shows it.
func settledHeap(settle time.Duration) memSample {
	var least memSample
	for i := range 5 {
		time.Sleep(settle)
		if s := heapNow(); i == 0 || s.heap < least.heap {
			least = s
		}
	}
	return least
}

// gcReport is what the collector cost and kept: its CPU since the process started (the cold
// start's, mostly) against all of the process's, its cycles, and the heap goal and the heap
// memory held from the OS now. With GOGC or GOMEMLIMIT set it shows their trade
// (BENCHMARKS.md, "GOGC and GOMEMLIMIT for host processes").
func gcReport() string {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/goal:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	mib := func(i int) float64 { return float64(s[i].Value.Uint64()) / (1 << 20) }
	// The idle mark workers only use Ps that had nothing to run: not a cost.
	return fmt.Sprintf("gc_cpu_s=%.2f user_cpu_s=%.2f cycles=%d heap_goal_mib=%.1f mapped_mib=%.1f",
		s[0].Value.Float64()-s[1].Value.Float64(), s[2].Value.Float64(), s[3].Value.Uint64(), mib(4), mib(5)-mib(6))
}

// memPerMemberBound bounds a member's heap on a host at the default 100 groups: measured
// 6,256-7,168 B (20 runs, and 6,515-6,850 with -race, on a loaded 2-core machine), 7,923-7,960
// B before the elector's leader-only state, the host-only metrics' collectors and the
// elector's own logger were cut (e44bba1, docs/design.md "What a member costs"), and 12,570 B
// before zap's With and the maps of a member's links were (3bb74e8). Larger runs
// (DLEDGER_MEM_GROUPS=1000) read more calls in flight: 7.4-8.2 KiB there.
// Then (hmem3: a burst's pending-call maps freed, only a leader's peers table, a shared elector
// Config, no EventsReady channel on a host) 5,594-6,003 B in 20 runs (median 5,660) and
// 5,658-6,392 in 20 -race runs (median 5,800), against 6,448-6,869 (median 6,480) for df64c5b,
// runs of one process each (-count). The test now runs in a process of its own (runMemChild),
// whose one measurement reads more than a -count series' later ones: 6,003-6,434 B in eight
// -race runs at load 4-7 (the merged tree, least of five samples, every member following its
// leader), against 6,684-8,097 B for c1a1f91 (one sample, a quorum following). The bound keeps
// 27 % over the worst of those eight runs, as CI's machine has given no sample of this
// measurement yet: a regression of some 2 KiB a member (a goroutine's stack, a buffer per
// member) fails it.
// Then (hmem4: the settings and peers a host's members share, the journal's one map, the
// leader-only acks) 5,212-5,711 B in 22 -race runs at a load of 7-9 (median 5,322), against
// 6,283-6,478 for 4fe173c (no -race, 300 groups: 5,414-5,472 after). The bound keeps 15 % over
// the worst of those 22 runs; merged with the session's other branches it read 5,333 B, and
// the bound is 7,168 B (34 % over that), as CI's machine has not measured this tree yet and a
// flaky bound would stop every landing: a regression of about 2 KiB a member still fails it.
// Then (hheap: no logger kept per member, the Elector in the 1,024-byte class, the metrics
// told by the publisher, a host-only Metrics, MemberState and Dispatcher each a class down;
// the test's logger at error, so that a link's sampler made by a warning under load is not
// read as a member's) 4,533-4,963 B in 8 -race runs at a load of 3-5 (median 4,626),
// interleaved with 01bf55f's 5,282-5,573 (median 5,399), and 4,547-5,259 in 20 more -race
// runs. The bound keeps 17 % over the worst of those 28 runs and 33 % over their median:
// a regression of about 1.5 KiB a member fails it.
// Then (hmem: the Elector in the 896-byte class, the Server in the 384-byte one, a route
// keeping its member's peers list, a memberLink, JournalStore and Membership each a class
// down, the host's members by group, no parsed order of succession) 4,211-4,506 B in 6 -race
// runs at a load of 3-6 (median 4,270), interleaved with 3e09a94's 4,618-4,810 (median
// 4,668). The bound keeps 25 % over the worst of those runs and 32 % over their median: a
// regression of about 1.3 KiB a member fails it.
// Then (hmem2: the balancer's view shares its groups' members lists, the Maintainer's record
// in the 96-byte class, one host-links entry a member) 4,099-4,447 B in 8 -race runs at a
// load of 3 (median 4,160), interleaved with d2e6d6b's 4,309-4,376 (median 4,365). The bound
// keeps 21 % over the worst of those runs and 29 % over their median: a regression of about
// 1.2 KiB a member fails it.
// Then (hmem3, 2026-11-28: the ids a member hears kept as its list's strings, the order of
// succession as the process's one copy, the watch ring made with its hub, no transport value
// or deliver func per member) 4,027-4,303 B in 12 runs (median 4,202), interleaved with
// 8fdcf8c's 4,011-4,358 (median 4,222): the tens of bytes these save a member are within the
// runs' spread. The bound keeps 22 % over the worst of those 24 runs and 24 % over the
// median: a regression of about 1 KiB a member fails it.
const memPerMemberBound = 5248

// TestHostMemoryPerMember measures what a group member costs a host (docs/design.md, "What a
// member costs"): heap bytes and goroutines per member added to three running hosts, once
// every group has a leader. It fails when a member costs a goroutine of its own, or more heap
// than memPerMemberBound: a per-member goroutine, timer or large buffer that comes back.
// DLEDGER_MEM_GROUPS sets the groups added (default 100); DLEDGER_MEM_PROFILE names a file
// for a heap profile of the settled hosts.
//
// The measurement runs in a child process of the test binary (this test alone): the heap of
// a package's test process holds whatever the tests before it left (CI once measured 9,971 B
// a member over a 162 MiB heap that the earlier tests of ./server left behind), and a delta
// of 2-3 MiB is not readable against that.
func TestHostMemoryPerMember(t *testing.T) {
	if os.Getenv(memChildEnv) == "" {
		runMemChild(t, "TestHostMemoryPerMember")
		return
	}
	groups := 100
	if n, err := strconv.Atoi(os.Getenv("DLEDGER_MEM_GROUPS")); err == nil && n > 0 {
		groups = n
	}
	if os.Getenv("DLEDGER_MEM_PROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
	before, after, stop := memHosts(t, 10, groups, 500*time.Millisecond)
	defer stop()
	members := 3 * groups
	perMember := (float64(after.heap) - float64(before.heap)) / float64(members)
	goroutines := float64(after.goroutines-before.goroutines) / float64(members)
	t.Logf("groups=%d members=%d heap_per_member=%.0f B goroutines_per_member=%.2f heap=%.1f MiB",
		groups, members, perMember, goroutines, float64(after.heap)/(1<<20))
	t.Logf("gc: %s", gcReport())
	if p := os.Getenv("DLEDGER_MEM_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if goroutines >= 0.5 {
		t.Errorf("%.2f goroutines per member: a member must not run a goroutine of its own on a host", goroutines)
	}
	if perMember > memPerMemberBound {
		t.Errorf("%.0f bytes of heap per member, bound %d", perMember, memPerMemberBound)
	}
}

// memChildEnv marks the child process a memory test runs its measurement in.
const memChildEnv = "DLEDGER_MEM_CHILD"

// runMemChild runs test alone in a fresh process of this test binary (the race detector and
// the other flags it was built and run with are the same) and fails t if it fails, showing
// its output either way.
func runMemChild(t *testing.T, test string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=^" + test + "$", "-test.v", "-test.count=1"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), memChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child process:\n%s", out)
	if err != nil {
		t.Fatalf("%s in a child process: %v", test, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s in a child process did not pass", test)
	}
}
