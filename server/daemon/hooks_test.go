package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc/protocol"
	"github.com/dledger-go/dledger/server"
)

// hookRecorder is a hookObserver that keeps every run's hook and result.
type hookRecorder struct {
	mu   sync.Mutex
	runs []string // "hook result"
}

func (r *hookRecorder) HookRan(hook, result string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, hook+" "+result)
}

func (r *hookRecorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.runs...)
}

// await waits until n runs have ended and returns them.
func (r *hookRecorder) await(t *testing.T, n int) []string {
	t.Helper()
	dledgertest.Eventually(t, dledgertest.WaitLimit, fmt.Sprintf("%d hook runs", n), func() bool { return len(r.get()) >= n })
	return r.get()
}

type hookTest struct {
	dir  string
	r    *hookRunner
	rec  *hookRecorder
	logs *observer.ObservedLogs
}

// newHookTest starts a runner whose commands may use DIR for the test's directory.
func newHookTest(t *testing.T, onRoleChange, onStop string, timeout time.Duration) *hookTest {
	t.Helper()
	dir := t.TempDir()
	core, logs := observer.New(zapcore.DebugLevel)
	h := &hookTest{dir: dir, rec: &hookRecorder{}, logs: logs}
	sub := func(s string) string { return strings.ReplaceAll(s, "DIR", "'"+dir+"'") }
	h.r = newHookRunner("g", "n0", sub(onRoleChange), sub(onStop), timeout, zap.New(core), h.rec)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dledgertest.WaitLimit)
		defer cancel()
		h.r.finish(ctx, nil)
	})
	return h
}

func setKillGrace(t *testing.T, d time.Duration) {
	old := hookKillGrace
	hookKillGrace = d
	t.Cleanup(func() { hookKillGrace = old })
}

func (h *hookTest) lines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func (h *hookTest) exists(name string) bool {
	_, err := os.Stat(filepath.Join(h.dir, name))
	return err == nil
}

func ev(seq uint64, role protocol.Role, term int64, leader string) dledger.RoleEvent {
	return dledger.RoleEvent{Seq: seq, Role: role, Term: term, LeaderID: leader, At: time.Now()}
}

// processGone reports whether the process with the pid in file is gone (or a zombie waiting
// for a parent that is not this test).
func processGone(t *testing.T, file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", file, b)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(rest, "Z")
}

// The hook gets the event in its environment, and the role it last ran for.
func TestHookRunsWithTheEventInItsEnvironment(t *testing.T) {
	h := newHookTest(t, `env | grep '^DLEDGER_' | sort > DIR/$DLEDGER_SEQ.env`, "", 10*time.Second)
	h.r.onEvent(ev(1, protocol.CANDIDATE, 7, ""))
	h.rec.await(t, 1)
	h.r.onEvent(ev(2, protocol.LEADER, 7, "n0"))
	if got := h.rec.await(t, 2); !reflect.DeepEqual(got, []string{"on_role_change ok", "on_role_change ok"}) {
		t.Fatalf("runs %v", got)
	}
	for name, want := range map[string][]string{
		"1.env": {"DLEDGER_GROUP=g", "DLEDGER_HOOK=on_role_change", "DLEDGER_ID=n0", "DLEDGER_LEADER=",
			"DLEDGER_PREVIOUS_ROLE=UNKNOWN", "DLEDGER_ROLE=CANDIDATE", "DLEDGER_SEQ=1", "DLEDGER_TERM=7"},
		"2.env": {"DLEDGER_GROUP=g", "DLEDGER_HOOK=on_role_change", "DLEDGER_ID=n0", "DLEDGER_LEADER=n0",
			"DLEDGER_PREVIOUS_ROLE=CANDIDATE", "DLEDGER_ROLE=LEADER", "DLEDGER_SEQ=2", "DLEDGER_TERM=7"},
	} {
		got := map[string]bool{}
		for _, l := range h.lines(t, name) {
			got[l] = true
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s lacks %s: %v", name, w, h.lines(t, name))
			}
		}
	}
}

// A newer event cancels a hook still running: SIGTERM to its whole process group, SIGKILL
// after the grace to what is left (a grandchild that ignores SIGTERM; one that cleans up
// within the grace finishes), then the hook runs for the newer event.
func TestANewerEventCancelsTheRunningHook(t *testing.T) {
	setKillGrace(t, 3*time.Second) // generous for the cleanup of 0.2 s on a busy machine
	h := newHookTest(t, `
echo "start $DLEDGER_SEQ" >> DIR/log
if [ "$DLEDGER_SEQ" = 1 ]; then
	trap 'echo "term $DLEDGER_SEQ" >> DIR/log; exit 143' TERM
	(trap '' TERM; exec sleep 1000) >/dev/null 2>&1 &
	echo $! > DIR/grandchild.pid
	(trap 'sleep 0.2; echo cleaned > DIR/cleaned; exit 0' TERM; : > DIR/cleaner.ready; sleep 1000 & wait) >/dev/null 2>&1 &
	sleep 1000 &
	wait
fi
echo "done $DLEDGER_SEQ" >> DIR/log`, "", time.Hour)
	h.r.onEvent(ev(1, protocol.CANDIDATE, 1, ""))
	dledgertest.Eventually(t, dledgertest.WaitLimit, "hook 1 to start its children", func() bool {
		return h.exists("grandchild.pid") && h.exists("cleaner.ready") && len(h.lines(t, "log")) == 1
	})
	h.r.onEvent(ev(2, protocol.FOLLOWER, 1, "n1"))
	if got := h.rec.await(t, 2); !reflect.DeepEqual(got, []string{"on_role_change cancelled", "on_role_change ok"}) {
		t.Fatalf("runs %v", got)
	}
	if got, want := h.lines(t, "log"), []string{"start_1", "term_1", "start_2", "done_2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the grandchild that ignored SIGTERM to be killed", func() bool {
		return processGone(t, filepath.Join(h.dir, "grandchild.pid"))
	})
	if !h.exists("cleaned") {
		t.Fatal("the grandchild that cleans up on SIGTERM was killed before the grace was over")
	}
	if h.logs.FilterMessageSnippet("hook killed: a newer role event came first").Len() != 1 {
		t.Fatalf("no log line for the cancelled hook: %v", h.logs.All())
	}
}

// Events that come while a hook runs are coalesced: the next run is for the newest only, and a
// hook never runs for (nor is cancelled by) an event older than the last one it ran for.
func TestHooksCoalesceAndNeverGoBack(t *testing.T) {
	setKillGrace(t, time.Minute) // hooks 1 and 4 ignore SIGTERM and live until their gate opens
	h := newHookTest(t, `
echo "$DLEDGER_SEQ" >> DIR/log
if [ "$DLEDGER_SEQ" = 1 ] || [ "$DLEDGER_SEQ" = 4 ]; then
	trap '' TERM
	while [ ! -e DIR/gate$DLEDGER_SEQ ]; do sleep 0.01; done
fi`, "", time.Hour)
	open := func(seq int) {
		if err := os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("gate%d", seq)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.r.onEvent(ev(1, protocol.CANDIDATE, 1, ""))
	dledgertest.Eventually(t, dledgertest.WaitLimit, "hook 1 to start", func() bool { return len(h.lines(t, "log")) == 1 })
	// While hook 1 runs: 2, 3 and 4 come (each returns at once), and a stale 2 and 3 again.
	for _, seq := range []uint64{2, 3, 4, 2, 3} {
		h.r.onEvent(ev(seq, protocol.FOLLOWER, 1, "n1"))
	}
	open(1)
	dledgertest.Eventually(t, dledgertest.WaitLimit, "hook 4 to start", func() bool { return len(h.lines(t, "log")) == 2 })
	h.r.onEvent(ev(3, protocol.FOLLOWER, 1, "n1")) // older than 4, which runs: neither runs nor cancels it
	open(4)
	if got := h.rec.await(t, 2); got[1] != "on_role_change ok" {
		t.Fatalf("runs %v: the hook for 4 was cancelled by an older event", got)
	}
	h.r.onEvent(ev(5, protocol.LEADER, 2, "n0"))
	h.rec.await(t, 3)
	if got, want := h.lines(t, "log"), []string{"1", "4", "5"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("hooks ran for %v, want %v", got, want)
	}
}

// Rapid role changes: whatever the timing, hooks run one at a time for increasing seqs, every
// run but the last is cancelled, and the last event's hook runs to the end.
func TestHooksUnderRapidRoleChanges(t *testing.T) {
	const last = 200
	h := newHookTest(t, `
trap 'rmdir DIR/running 2>/dev/null; exit 143' TERM
mkdir DIR/running || echo overlap >> DIR/log
echo "$DLEDGER_SEQ" >> DIR/log
if [ "$DLEDGER_SEQ" != `+strconv.Itoa(last)+` ]; then sleep 1000 & wait; fi
rmdir DIR/running`, "", time.Hour)
	for seq := uint64(1); seq <= last; seq++ {
		h.r.onEvent(ev(seq, protocol.Role(1+seq%3), int64(seq), ""))
	}
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the hook for the last event to finish", func() bool {
		runs := h.rec.get()
		return len(runs) > 0 && runs[len(runs)-1] == "on_role_change ok"
	})
	runs, log := h.rec.get(), h.lines(t, "log")
	prev := 0
	for _, l := range log {
		seq, err := strconv.Atoi(l)
		if err != nil || seq <= prev {
			t.Fatalf("hooks ran for %v: not one at a time for increasing seqs", log)
		}
		prev = seq
	}
	if prev != last || len(log) > len(runs) { // a hook killed early may have logged nothing
		t.Fatalf("log %v, runs %v", log, runs)
	}
	for _, r := range runs[:len(runs)-1] {
		if r != "on_role_change cancelled" {
			t.Fatalf("runs %v: all but the last should be cancelled", runs)
		}
	}
	t.Logf("%d events, %d hook runs", last, len(runs))
}

// A hook past its timeout is killed, process group and all, even if it ignores SIGTERM; the
// failure is counted and logged with the hook's output.
func TestHookTimeoutKillsIt(t *testing.T) {
	setKillGrace(t, 200*time.Millisecond)
	h := newHookTest(t, `
trap '' TERM
echo slow to finish
sleep 1000 &
echo $! > DIR/child.pid
wait`, "", 300*time.Millisecond)
	h.r.onEvent(ev(1, protocol.LEADER, 3, "n0"))
	if got := h.rec.await(t, 1); !reflect.DeepEqual(got, []string{"on_role_change timeout"}) {
		t.Fatalf("runs %v", got)
	}
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the hook's child to be killed", func() bool {
		return processGone(t, filepath.Join(h.dir, "child.pid"))
	})
	logged := h.logs.FilterMessageSnippet("ran past the hook timeout").All()
	if len(logged) != 1 || logged[0].ContextMap()["output"] != "slow to finish" {
		t.Fatalf("log lines %v", h.logs.All())
	}
}

// A failing hook is logged (with its output and exit status) and counted; the next event's
// hook runs as usual.
func TestHookFailureIsLoggedAndCounted(t *testing.T) {
	h := newHookTest(t, `echo "boom $DLEDGER_SEQ" >&2; [ "$DLEDGER_SEQ" = 2 ]`, "", 10*time.Second)
	h.r.onEvent(ev(1, protocol.CANDIDATE, 1, ""))
	h.rec.await(t, 1)
	h.r.onEvent(ev(2, protocol.FOLLOWER, 1, "n1"))
	if got := h.rec.await(t, 2); !reflect.DeepEqual(got, []string{"on_role_change error", "on_role_change ok"}) {
		t.Fatalf("runs %v", got)
	}
	failed := h.logs.FilterMessage("hook failed").All()
	if len(failed) != 1 || failed[0].ContextMap()["output"] != "boom 1" || failed[0].ContextMap()["error"] != "exit status 1" ||
		failed[0].ContextMap()["seq"] != uint64(1) {
		t.Fatalf("failure log %v", h.logs.All())
	}
}

// At Stop the hook runs for the final event (once, even if it was already delivered), then
// on-stop runs once, with the final event and the role before it.
func TestOnStopRunsOnceAfterTheFinalEvent(t *testing.T) {
	h := newHookTest(t, `echo "$DLEDGER_SEQ $DLEDGER_ROLE" >> DIR/log`,
		`echo "$DLEDGER_HOOK $DLEDGER_ROLE $DLEDGER_PREVIOUS_ROLE $DLEDGER_SEQ $DLEDGER_TERM" >> DIR/log`, 10*time.Second)
	h.r.onEvent(ev(1, protocol.CANDIDATE, 4, ""))
	h.rec.await(t, 1)
	h.r.onEvent(ev(2, protocol.LEADER, 4, "n0"))
	h.rec.await(t, 2)
	final := ev(3, protocol.UNKNOWN, 4, "")
	h.r.onEvent(final)
	h.rec.await(t, 3)
	h.r.finish(context.Background(), &final)
	want := []string{"1_CANDIDATE", "2_LEADER", "3_UNKNOWN", "on_stop_UNKNOWN_LEADER_3_4"}
	if got := h.lines(t, "log"); !reflect.DeepEqual(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	if got := h.rec.get(); len(got) != 4 || got[3] != "on_stop ok" {
		t.Fatalf("runs %v", got)
	}
	h.r.finish(context.Background(), &final) // a second finish runs nothing
	if got := h.lines(t, "log"); len(got) != 4 {
		t.Fatalf("log after a second finish %v", got)
	}
}

// Stop's deadline bounds the hooks: a stuck on-stop hook is killed when ctx ends.
func TestStopDeadlineKillsAStuckOnStopHook(t *testing.T) {
	setKillGrace(t, 200*time.Millisecond)
	h := newHookTest(t, "", `trap '' TERM; echo started > DIR/started; sleep 1000 & echo $! > DIR/child.pid; wait`, time.Hour)
	final := ev(1, protocol.UNKNOWN, 1, "")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { h.r.finish(ctx, &final); close(done) }()
	select {
	case <-done:
	case <-time.After(dledgertest.WaitLimit):
		t.Fatal("finish did not return after its ctx ended")
	}
	if got := h.rec.get(); !reflect.DeepEqual(got, []string{"on_stop cancelled"}) || !h.exists("started") {
		t.Fatalf("runs %v", got)
	}
	dledgertest.Eventually(t, dledgertest.WaitLimit, "the on-stop hook's child to be killed", func() bool {
		return processGone(t, filepath.Join(h.dir, "child.pid"))
	})
}

func TestHookSettingsAreValidated(t *testing.T) {
	r, err := Config{}.resolve()
	if err != nil || r.HookTimeout != DefaultHookTimeout {
		t.Fatalf("zero hook timeout resolves to %v, %v", r.HookTimeout, err)
	}
	for _, c := range []Config{{HookTimeout: -time.Second}, {OnRoleChange: "echo \x00"}, {OnStop: "a\x00b"}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if hookStopTimeout(Config{}) != 0 {
		t.Error("hookStopTimeout without hooks")
	}
	if d := hookStopTimeout(Config{OnStop: "true"}); d < 2*DefaultHookTimeout {
		t.Errorf("hookStopTimeout %v", d)
	}
}

// A member runs the daemon's hooks for its own role events and at Stop, counts them on the
// daemon's registry, and gives the registry back at Stop; its StopTimeout includes the hooks'.
func TestServerRunsHooksOnItsRoleEvents(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	cfg := server.Config{Group: "g", SelfID: "n0", Peers: peersString(freePorts(t, 1)), DataDir: t.TempDir(), Insecure: true,
		Ledger: server.LedgerNone, Election: fastTimings()}
	d, err := New(Config{
		OnRoleChange: fmt.Sprintf(`echo "$DLEDGER_SEQ $DLEDGER_ROLE $DLEDGER_LEADER $DLEDGER_GROUP" >> '%s/log'`, dir),
		OnStop:       fmt.Sprintf(`echo "stop $DLEDGER_ROLE $DLEDGER_PREVIOUS_ROLE" >> '%s/log'`, dir)}, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	hooks := server.WithAttacher(d.Attacher())
	s, err := server.New(cfg, hooks, server.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if s.StopTimeout() < hookStopTimeout(d.cfg) {
		t.Fatalf("StopTimeout %v leaves the hooks' %v out", s.StopTimeout(), hookStopTimeout(d.cfg))
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	read := func() string { b, _ := os.ReadFile(filepath.Join(dir, "log")); return string(b) }
	dledgertest.Eventually(t, electionLimit, "the hook to run for leadership", func() bool {
		return strings.Contains(read(), " LEADER n0 g\n")
	})
	dledgertest.Eventually(t, dledgertest.WaitLimit, "dledger_hook_runs_total{on_role_change,ok} to count it", func() bool {
		return hookRuns(t, reg, "on_role_change", "ok") >= 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(read()), "\n")
	if n := len(lines); n < 3 || !strings.HasSuffix(lines[n-2], " UNKNOWN  g") || lines[n-1] != "stop UNKNOWN LEADER" {
		t.Fatalf("hook log %q: want the final UNKNOWN run, then on-stop", lines)
	}
	// The hook metrics went with the member: a new one registers on the same registry.
	s2, err := server.New(cfg, hooks, server.WithRegisterer(reg))
	if err != nil {
		t.Fatalf("a second member on the registry: %v", err)
	}
	s2.Stop(context.Background())
}

func hookRuns(t *testing.T, g prometheus.Gatherer, hook, result string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metrics.HookNames[0] {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["hook"] == hook && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{hook=%s,result=%s}", metrics.HookNames[0], hook, result)
	return 0
}
