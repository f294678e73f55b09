package compare

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// Answers captured from the real systems on loopback (etcd 3.4.23, ZooKeeper 3.8.0) and from
// `dledger server`.
const (
	etcdStatus = `{"header":{"cluster_id":"5632939151584063523","member_id":"15101859335780327642","revision":"1","raft_term":"2"},` +
		`"version":"3.4.23","dbSize":"20480","leader":"11539305337000706507","raftIndex":"8","raftTerm":"2","raftAppliedIndex":"8","dbSizeInUse":"16384"}`
	etcdStatusLeader = `{"header":{"member_id":"11539305337000706507","raft_term":"2"},"leader":"11539305337000706507","raftTerm":"2"}`
	// No leader known: proto3 leaves the zero out.
	etcdStatusNoLeader = `{"header":{"cluster_id":"5632939151584063523","member_id":"15101859335780327642","revision":"1","raft_term":"3"},"version":"3.4.23","raftTerm":"3"}`
	// etcdctl endpoint status -w json writes numbers, not strings.
	etcdctlStatus = `{"header":{"cluster_id":5632939151584063523,"member_id":15101859335780327642,"revision":1,"raft_term":2},"leader":11539305337000706507,"raftTerm":2}`

	zkFollower = "{\n  \"is_leader\" : false,\n  \"leader_id\" : 2,\n  \"leader_ip\" : \"127.0.0.1\",\n  \"command\" : \"leader\",\n  \"error\" : null\n}"
	zkLeader   = "{\n  \"is_leader\" : true,\n  \"leader_id\" : 2,\n  \"leader_ip\" : \"127.0.0.1\",\n  \"command\" : \"leader\",\n  \"error\" : null\n}"
	zkElecting = "{\n  \"command\" : \"leader\",\n  \"error\" : \"This ZooKeeper instance is not currently serving requests\"\n}"

	oursFollower  = `{"group":"compare","selfId":"n1","role":"FOLLOWER","term":4,"leaderId":"n0","voteFor":"n0","lastHeartBeatMsAgo":12}`
	oursCandidate = `{"group":"compare","selfId":"n2","role":"CANDIDATE","term":5,"leaderId":"","voteFor":"n2","lastHeartBeatMsAgo":-1}`
)

func TestParseEtcdStatus(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       view
	}{
		{"follower", etcdStatus, view{self: "15101859335780327642", leader: "11539305337000706507", term: 2}},
		{"leader", etcdStatusLeader, view{self: "11539305337000706507", leader: "11539305337000706507", term: 2, isLeader: true}},
		{"no leader", etcdStatusNoLeader, view{self: "15101859335780327642", term: 3}},
		{"etcdctl numbers", etcdctlStatus, view{self: "15101859335780327642", leader: "11539305337000706507", term: 2}},
	} {
		got, err := parseEtcdStatus([]byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `{}`, `{"header":{"member_id":"-1"}}`, `{"header":{"member_id":"x"}}`,
		`{"header":{"member_id":"1"},"leader":"99999999999999999999999"}`, `[1]`} {
		if v, err := parseEtcdStatus([]byte(bad)); err == nil {
			t.Errorf("parseEtcdStatus(%q) = %+v, want an error", bad, v)
		}
	}
}

func TestParseZKLeader(t *testing.T) {
	for _, tc := range []struct {
		name, body, myid string
		want             view
	}{
		{"follower", zkFollower, "1", view{self: "1", leader: "2"}},
		{"leader", zkLeader, "2", view{self: "2", leader: "2", isLeader: true}},
		{"electing", zkElecting, "3", view{self: "3"}},
		{"leader id 0", `{"is_leader":false,"leader_id":0,"error":null}`, "1", view{self: "1"}},
		{"an error wins over stale fields", `{"is_leader":false,"leader_id":2,"error":"not serving"}`, "1", view{self: "1"}},
	} {
		got, err := parseZKLeader([]byte(tc.body), tc.myid)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	// A member that says it leads must name itself.
	if v, err := parseZKLeader([]byte(zkLeader), "3"); err == nil {
		t.Errorf("a leader naming another member: got %+v, want an error", v)
	}
	for _, bad := range []string{``, `nope`, `{"is_leader":"yes","leader_id":2}`, `{"is_leader":false,"leader_id":"2"}`} {
		if v, err := parseZKLeader([]byte(bad), "1"); err == nil {
			t.Errorf("parseZKLeader(%q) = %+v, want an error", bad, v)
		}
	}
}

func TestParseOursStatus(t *testing.T) {
	got, err := parseOursStatus([]byte(oursFollower))
	if want := (view{self: "n1", leader: "n0", term: 4}); err != nil || got != want {
		t.Errorf("follower: got %+v, %v; want %+v", got, err, want)
	}
	got, err = parseOursStatus([]byte(oursCandidate))
	if want := (view{self: "n2", term: 5}); err != nil || got != want {
		t.Errorf("candidate: got %+v, %v; want %+v", got, err, want)
	}
	got, err = parseOursStatus([]byte(`{"selfId":"n0","role":"LEADER","term":7,"leaderId":"n0"}`))
	if want := (view{self: "n0", leader: "n0", term: 7, isLeader: true}); err != nil || got != want {
		t.Errorf("leader: got %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{``, `{}`, `{"selfId":"n0","term":-1}`, `{"selfId":"n0","term":"1"}`} {
		if v, err := parseOursStatus([]byte(bad)); err == nil {
			t.Errorf("parseOursStatus(%q) = %+v, want an error", bad, v)
		}
	}
}

func TestAgreedLeader(t *testing.T) {
	f := func(leader string, term uint64) view { return view{leader: leader, term: term} }
	for _, tc := range []struct {
		name   string
		latest map[int]view
		want   string
	}{
		{"both survivors still name the dead leader", map[int]view{1: f("a", 1), 2: f("a", 1)}, ""},
		{"one names the new leader, one the old", map[int]view{1: f("b", 2), 2: f("a", 1)}, ""},
		{"one names the new leader, one none", map[int]view{1: f("b", 2), 2: f("", 2)}, ""},
		{"only one answered", map[int]view{1: f("b", 2)}, ""},
		{"same leader, different terms", map[int]view{1: f("b", 2), 2: f("b", 3)}, ""},
		{"a quorum agrees", map[int]view{1: f("b", 2), 2: f("b", 2)}, "b"},
		{"no terms (ZooKeeper)", map[int]view{1: f("3", 0), 2: f("3", 0)}, "3"},
	} {
		got, ok := agreedLeader(tc.latest, 3, "a")
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: got %q %v, want %q", tc.name, got, ok, tc.want)
		}
	}
	// Five members: three of them must agree.
	five := map[int]view{1: f("b", 2), 2: f("b", 2), 3: f("c", 2)}
	if got, ok := agreedLeader(five, 5, "a"); ok {
		t.Errorf("5 members, 2 agree: got %q, want no agreement", got)
	}
	five[4] = f("b", 2)
	if got, ok := agreedLeader(five, 5, "a"); !ok || got != "b" {
		t.Errorf("5 members, 3 agree: got %q %v, want b", got, ok)
	}
}

func TestUnanimous(t *testing.T) {
	fol := func(self, leader string) view { return view{self: self, leader: leader, term: 3} }
	lead := view{self: "a", leader: "a", term: 3, isLeader: true}
	steady := map[int]view{0: lead, 1: fol("b", "a"), 2: fol("c", "a")}
	if l, i, ok := unanimous(steady, 3); !ok || l != "a" || i != 0 {
		t.Errorf("steady group: got %q %d %v, want a 0 true", l, i, ok)
	}
	for name, latest := range map[string]map[int]view{
		"a member missing":           {0: lead, 1: fol("b", "a")},
		"a member without leader":    {0: lead, 1: fol("b", "a"), 2: fol("c", "")},
		"a member elsewhere":         {0: lead, 1: fol("b", "a"), 2: fol("c", "b")},
		"no member leads":            {0: fol("a", "a"), 1: fol("b", "a"), 2: fol("c", "a")},
		"two leaders":                {0: lead, 1: {self: "b", leader: "b", term: 3, isLeader: true}, 2: fol("c", "a")},
		"a follower in another term": {0: lead, 1: fol("b", "a"), 2: {self: "c", leader: "a", term: 2}},
	} {
		if l, _, ok := unanimous(latest, 3); ok {
			t.Errorf("%s: got steady with leader %q", name, l)
		}
	}
}

func TestPercentileAndRatio(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*10*time.Millisecond)
	}
	for _, tc := range []struct{ p, want float64 }{{50, 100}, {90, 180}, {99, 200}, {100, 200}, {0, 10}, {5, 10}, {6, 20}} {
		if got := harness.Percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v of 10..200 ms = %v, want %v", tc.p, got, tc.want)
		}
	}
	if ds[0] != 200*time.Millisecond {
		t.Error("percentile sorted its argument in place")
	}
	if !math.IsNaN(harness.Percentile(nil, 50)) {
		t.Error("percentile of nothing should be NaN")
	}
	if got := ratio(300, 600); got != 0.5 {
		t.Errorf("ratio(300, 600) = %v", got)
	}
	for _, r := range []float64{ratio(1, 0), ratio(math.NaN(), 1), ratio(1, math.NaN())} {
		if !math.IsNaN(r) {
			t.Errorf("ratio with a missing or zero side = %v, want NaN", r)
		}
	}
}

func TestTableRatiosAgainstOurs(t *testing.T) {
	msd := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	rows := []*row{
		{set: "matched", system: "ours", elapsed: msd(400, 500, 600), idleCPU: []float64{0.01, 0.03}, rss: []int64{10 << 20, 20 << 20}},
		{set: "matched", system: "etcd", elapsed: msd(800, 1000, 1500)},
		{set: "defaults", system: "zookeeper", elapsed: msd(100)}, // no ours in this set: no ratio
		{set: "defaults", system: "etcd", skipped: "no etcd executable"},
	}
	var buf bytes.Buffer
	writeTable(&buf, rows)
	out := buf.String()
	for _, want := range []string{
		"| matched | ours |  | 3 | 500.0 | 600.0 | 600.0 | 600.0 | 1.00x | 1.00x | 1.00x | 2.00 | 15.0 | 0 |",
		"| matched | etcd |  | 3 | 1000.0 | 1500.0 | 1500.0 | 1500.0 | 2.00x | 2.50x | 2.50x | - | - | 0 |",
		"| defaults | zookeeper |  | 1 | 100.0 | 100.0 | 100.0 | 100.0 | - | - | - | - | - | 0 |",
		"skipped: no etcd executable |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	line := summaryLine(rows, rows[1])
	if !strings.Contains(line, "ratio_p50=2.00 ratio_p90=2.50 ratio_p99=2.50") || !strings.HasPrefix(line, "compare: set=matched system=etcd trials=3 failed=0 p50_ms=1000.0") {
		t.Errorf("summary line: %s", line)
	}
}

func TestParseProcUsage(t *testing.T) {
	// A command name with spaces and a parenthesis, as a JVM thread may have.
	stat := "4242 (java (Quorum) x) S 1 4242 4242 0 -1 4194560 4925 0 0 0 1234 567 0 0 20 0 42 0 39127 3958697984 24001 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
	cpu, err := parseStatCPU(stat)
	if err != nil || math.Abs(cpu-18.01) > 1e-9 {
		t.Errorf("parseStatCPU = %v, %v; want 18.01 s (1234 + 567 ticks)", cpu, err)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 ten 12 13"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): want an error", bad)
		}
	}
	status := "Name:\tetcd\nVmPeak:\t  100 kB\nVmRSS:\t   36044 kB\nRssAnon:\t  20000 kB\n"
	rss, err := parseStatusRSS(status)
	if err != nil || rss != 36044*1024 {
		t.Errorf("parseStatusRSS = %v, %v; want %d", rss, err, 36044*1024)
	}
	for _, bad := range []string{"", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseStatusRSS(bad); err == nil {
			t.Errorf("parseStatusRSS(%q): want an error", bad)
		}
	}
}
