package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/child"
	"github.com/dledger-go/dledger/dledger"
)

// TestPhasesReadISOAndEpochTimestamps: the phases come out of members' logs whether "ts" is
// RFC 3339 text (what members write) or Unix seconds (older members, zap's default), and a
// line whose ts is neither is skipped, not read as time zero.
func TestPhasesReadISOAndEpochTimestamps(t *testing.T) {
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	iso := func(tm time.Time) string { return `"` + tm.UTC().Format(child.LogTimeLayout) + `"` }
	epoch := func(tm time.Time) string { return fmt.Sprintf("%.6f", float64(tm.UnixMicro())/1e6) }
	for _, c := range []struct {
		name string
		ts   func(time.Time) string
	}{{"iso8601", iso}, {"epoch seconds", epoch}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			line := func(ms int, msg, self string, term int64) string {
				return fmt.Sprintf(`{"level":"info","ts":%s,"msg":%q,"self":%q,"term":%d}`, c.ts(at(ms)), msg, self, term)
			}
			logs := [][]string{
				{line(-50, dledger.EventBecomesCandidate, "n0", 3), // before the fault: not this trial's
					line(120, dledger.EventBecomesCandidate, "n0", 4),
					`{"level":"info","ts":"yesterday","msg":"` + dledger.EventBecomesCandidate + `"}`, // skipped
					`{"level":"info","ts":-1,"msg":"` + dledger.EventBecomesCandidate + `"}`,          // skipped
					"=== bench: start n0 (not JSON)"},
				{line(100, dledger.EventBecomesCandidate, "n1", 4),
					line(130, dledger.EventBecomesLeader, "n1", 4)},
			}
			c0 := &Cluster{}
			for i, l := range logs {
				path := filepath.Join(dir, fmt.Sprintf("n%d.log", i))
				if err := os.WriteFile(path, []byte(strings.Join(l, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				c0.Members = append(c0.Members, &Member{ID: fmt.Sprintf("n%d", i), Proc: child.Proc{LogPath: path}})
			}
			b := &bench{Harness: &Harness{c: c0}}
			r := trialResult{key: Leader{ID: "n1", Term: 4}}
			p := b.readPhases([]int{0, 1}, make([]int64, 2), t0, r, at(170))
			want := phases{ok: true, detect: 100 * time.Millisecond, elect: 30 * time.Millisecond, spread: 40 * time.Millisecond}
			// Unix seconds as a float64 carry about a microsecond of precision.
			near := func(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }
			if !p.ok || !near(p.detect, want.detect) || !near(p.elect, want.elect) || !near(p.spread, want.spread) {
				t.Fatalf("phases %s (%+v), want %s", p, p, want)
			}
		})
	}
}

// TestEventsLogUsesMembersTimeFormat: the benchmark's own timeline lines carry ts in the
// members' format, so one sort by ts merges them with the members' logs.
func TestEventsLogUsesMembersTimeFormat(t *testing.T) {
	c := &Cluster{dir: t.TempDir()}
	before := time.Now().Truncate(time.Microsecond)
	c.Note("kill -9 %s", "n0")
	b, err := os.ReadFile(filepath.Join(c.dir, "bench-events.log"))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct{ TS, Self, Msg string }
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ts, err := time.Parse(child.LogTimeLayout, ev.TS)
	if err != nil || ts.Before(before) || ts.After(time.Now()) || ev.Msg != "kill -9 n0" || ev.Self != "bench" {
		t.Fatalf("event %s: ts %v (%v)", b, ts, err)
	}
}

// TestColdStartPhasesEndDetectAtQuorum: a cold start's first phase ends when a quorum of the
// group is serving, not when the last member is: a leader can be elected before the slowest
// member starts (with the last member as the mark such a trial had no phases at all), and the
// quorum's start-up is the part no election rule can shorten. The summary reports that
// phase's percentiles.
func TestColdStartPhasesEndDetectAtQuorum(t *testing.T) {
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(ms int) string {
		return `"` + t0.Add(time.Duration(ms)*time.Millisecond).UTC().Format(child.LogTimeLayout) + `"`
	}
	line := func(ms int, msg, self string) string {
		return fmt.Sprintf(`{"level":"info","ts":%s,"msg":%q,"self":%q,"term":0}`, at(ms), msg, self)
	}
	// Five members up at 200, 50, 90, 80 and 120 ms: the third is up at 90 ms. n1 wins at
	// 110 ms, before the last member (200 ms) is up.
	upAt := []int{200, 50, 90, 80, 120}
	dir := t.TempDir()
	c0 := &Cluster{}
	var idxs []int
	for i, ms := range upAt {
		id := fmt.Sprintf("n%d", i)
		l := []string{line(ms, dledger.EventMemberStarted, id)}
		if id == "n1" {
			l = append(l, line(110, dledger.EventBecomesLeader, id))
		}
		path := filepath.Join(dir, id+".log")
		if err := os.WriteFile(path, []byte(strings.Join(l, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c0.Members = append(c0.Members, &Member{ID: id, Proc: child.Proc{LogPath: path}})
		idxs = append(idxs, i)
	}
	b := &bench{Harness: &Harness{c: c0, opts: Options{Scenario: ScenarioColdStart}}}
	r := trialResult{key: Leader{ID: "n1", Term: 0}, elapsed: 130 * time.Millisecond}
	r.phases = b.readPhases(idxs, make([]int64, len(upAt)), t0, r, t0.Add(130*time.Millisecond))
	want := phases{ok: true, detect: 90 * time.Millisecond, elect: 20 * time.Millisecond, spread: 20 * time.Millisecond}
	if r.phases != want {
		t.Fatalf("phases %s (%+v), want %s", r.phases, r.phases, want)
	}

	var s benchStats
	s.add(r)
	r2 := r
	r2.phases.detect = 140 * time.Millisecond
	s.add(r2)
	sum := s.summaryLine(Options{Scenario: ScenarioColdStart, Members: 5, Profile: "lan"})
	for _, f := range []string{"p50_detect_phase_ms=90.0", "p99_detect_phase_ms=140.0", "mean_detect_phase_ms=115.0"} {
		if !strings.Contains(sum, " "+f) {
			t.Errorf("summary lacks %s:\n%s", f, sum)
		}
	}
}
