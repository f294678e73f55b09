package server

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestHostIdleCPU measures what three idle hosts cost (docs/design.md, "What a host costs
// idle, measured"): three hosts in this process on loopback, lan profile, insecure, each a
// member of every one of DLEDGER_IDLE_GROUPS groups; once every group has a leader, the
// process's CPU time (/proc/self/stat) over DLEDGER_IDLE_SECONDS (default 10) is logged as a
// percentage of one core. A measurement, not a check: it runs only with DLEDGER_IDLE_GROUPS
// set, and never under -race.
func TestHostIdleCPU(t *testing.T) {
	groups, _ := strconv.Atoi(os.Getenv("DLEDGER_IDLE_GROUPS"))
	if groups <= 0 {
		t.Skip("set DLEDGER_IDLE_GROUPS to measure")
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("DLEDGER_IDLE_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	ports := freePorts(t, 3)
	var hosts []*Host
	for _, p := range ports {
		h, err := NewHost(HostConfig{Listen: fmt.Sprintf("127.0.0.1:%d", p), DataDir: t.TempDir(), Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		defer h.Stop(context.Background())
		hosts = append(hosts, h)
	}
	peers := peersString(ports)
	members := map[string][]*Server{}
	for g := range groups {
		name := fmt.Sprintf("g%05d", g)
		for i, h := range hosts {
			s, err := h.AddGroup(Config{Group: name, SelfID: fmt.Sprintf("n%d", i), Peers: peers, Election: dledger.DefaultConfig()})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.UpdateLedger(-1, -1); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			members[name] = append(members[name], s)
		}
	}
	for name, ms := range members {
		dledgertest.AwaitLeader(t, 3*time.Minute, 3, func() []dledgertest.Member {
			var v []dledgertest.Member
			for _, s := range ms {
				st := s.Status()
				v = append(v, dledgertest.Member{ID: st.SelfID, Up: true, Leading: st.Role == protocol.LEADER, LeaderID: st.LeaderID, Term: st.Term})
			}
			return v
		})
		_ = name
	}
	before, start := cpuTicks(t), time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	used, wall := cpuTicks(t)-before, time.Since(start)
	pct := float64(used) / 100 / wall.Seconds() * 100 // clock ticks are 1/100 s
	perMember := float64(used) * 1e4 / wall.Seconds() / float64(3*groups)
	t.Logf("idle-cpu groups=%d seconds=%d cpu_pct=%.1f us_per_member_second=%.0f", groups, secs, pct, perMember)
}

// cpuTicks is the process's user plus system time in clock ticks (/proc/self/stat fields 14
// and 15).
func cpuTicks(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat")
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}
