package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

func st(self, role string, term int64, leader string) adminclient.StatusJSON {
	return adminclient.StatusJSON{SelfID: self, Role: role, Term: term, LeaderID: leader}
}

// The tracker decides what the benchmark reports: when a quorum first agrees on a new leader,
// which later leaders count as needless changes, and two leaders in one term.
func TestBenchTracker(t *testing.T) {
	at := time.Unix(100, 0)
	obs := func(i int, s adminclient.StatusJSON) Observation { return Observation{Idx: i, At: at, St: s} }
	tr := newTracker(5, Leader{"n0", 3})
	steps := []struct {
		o    Observation
		want bool
	}{
		{obs(1, st("n1", "FOLLOWER", 3, "n0")), false}, // still the failed leader: not new
		{obs(1, st("n1", "LEADER", 4, "n1")), false},
		{obs(2, st("n2", "FOLLOWER", 4, "n1")), false},
		{Observation{Idx: 3, Err: errDeadline}, false}, // an error counts for nobody
		{obs(3, st("n3", "FOLLOWER", 4, "n1")), true},  // 3 of 5 agree
		{obs(4, st("n4", "FOLLOWER", 4, "n1")), false}, // only the first agreement is news
		{obs(2, st("n2", "LEADER", 5, "n2")), false},   // a needless change
	}
	for i, s := range steps {
		if got := tr.observe(s.o); got != s.want {
			t.Fatalf("step %d: observe = %v, want %v", i, got, s.want)
		}
	}
	if tr.converged != (Leader{"n1", 4}) || len(tr.seen) != 2 || tr.violation != "" {
		t.Fatalf("converged %v, seen %v, violation %q", tr.converged, tr.seen, tr.violation)
	}
	tr.observe(obs(4, st("n4", "FOLLOWER", 5, "n3")))
	if tr.violation == "" {
		t.Fatal("two leaders in term 5 not reported")
	}
}

func TestBenchUnanimous(t *testing.T) {
	latest := map[int]adminclient.StatusJSON{0: st("n0", "LEADER", 2, "n0"), 1: st("n1", "FOLLOWER", 2, "n0")}
	if _, _, ok := Unanimous(latest, 3, ViewOf); ok {
		t.Fatal("unanimous with a member missing")
	}
	latest[2] = st("n2", "CANDIDATE", 2, "")
	if _, _, ok := Unanimous(latest, 3, ViewOf); ok {
		t.Fatal("unanimous with a candidate")
	}
	latest[2] = st("n2", "FOLLOWER", 2, "n0")
	if k, _, ok := Unanimous(latest, 3, ViewOf); !ok || k != (Leader{"n0", 2}) {
		t.Fatalf("unanimous = %v %v, want n0@2", k, ok)
	}
}

func TestBenchPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 20; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{0: 1, 50: 10, 90: 18, 99: 20, 100: 20} {
		if got := Percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
}

func TestBenchOptionsResolve(t *testing.T) {
	o := Options{Members: 3, Trials: 1, Scenario: ScenarioPause, Profile: "lan", Poll: time.Millisecond,
		LogLevel: "info", Group: "g"}
	if err := o.Resolve(); err != nil {
		t.Fatal(err)
	}
	if o.Binary == "" || o.Settle != 2*o.cfg.DetectionWindow() || o.Timeout != o.GenerousBound() {
		t.Fatalf("defaults not filled in: binary %q settle %v timeout %v", o.Binary, o.Settle, o.Timeout)
	}
	o.LogLevel = "loud"
	if err := o.Resolve(); err == nil {
		t.Fatal("--log-level loud accepted")
	}
	// The members run the profile named (cluster.go passes --profile on), and the bench's own
	// bounds follow its timings: the fast profile's 75 ms heartbeat, its detection window lan's.
	o.LogLevel, o.Profile, o.Settle, o.Timeout = "info", "fast", 0, 0
	if err := o.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c := o.Timings(); c.HeartBeatInterval != 75*time.Millisecond || c.MaxHeartBeatLeak != 8 || o.Settle != 1200*time.Millisecond {
		t.Fatalf("--profile fast: timings %+v, settle %v", c, o.Settle)
	}
	o.Profile = "wan"
	if err := o.Resolve(); err == nil || !strings.Contains(err.Error(), "known: lan, dledger, fast") {
		t.Fatalf("--profile wan: %v, want the known profiles named", err)
	}
}
