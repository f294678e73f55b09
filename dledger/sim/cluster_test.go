package sim

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/protocol"
)

func newTestCluster(t *testing.T, o ClusterOptions) *Cluster {
	t.Helper()
	if o.Config.MaintainInterval == 0 {
		o.Config = dledger.DefaultConfig()
	}
	c, err := NewCluster(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitLeading runs c until some member leads, and returns it.
func awaitLeading(t *testing.T, c *Cluster) string {
	t.Helper()
	for range 1000 {
		for _, id := range c.IDs() {
			if c.Up(id) && c.Status(id).Role == protocol.LEADER {
				return id
			}
		}
		if err := c.Run(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no leader: %s", c.Describe())
	return ""
}

// The same calls on the same seed give the same run, trace line for trace line.
func TestClusterReplays(t *testing.T) {
	run := func() (string, []byte) {
		var trace bytes.Buffer
		c := newTestCluster(t, ClusterOptions{Seed: 3, Members: 5, Trace: &trace})
		l := awaitLeading(t, c)
		c.Crash(l)
		c.Isolate(c.IDs()[(indexOf(c, l)+1)%5], true)
		if err := c.Run(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		c.Restart(l)
		if err := c.Run(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		return c.Describe(), trace.Bytes()
	}
	d1, t1 := run()
	d2, t2 := run()
	if d1 != d2 || !bytes.Equal(t1, t2) || len(t1) == 0 {
		t.Fatalf("two runs differ:\n%s\n%s", d1, d2)
	}
}

func indexOf(c *Cluster, id string) int {
	for i, x := range c.IDs() {
		if x == id {
			return i
		}
	}
	return -1
}

// The checker runs in a Cluster as in Run: a member whose store lost its term (as a disk that
// drops fsynced data would) breaks S3 when it restarts, and Run says so.
func TestClusterReportsABrokenInvariant(t *testing.T) {
	c := newTestCluster(t, ClusterOptions{Seed: 1})
	l := awaitLeading(t, c)
	if c.Status(l).Term < 1 { // a group started together elects at term 0: fail over once
		c.Crash(l)
		if err := c.Run(time.Second); err != nil {
			t.Fatal(err)
		}
		c.Restart(l)
		l = awaitLeading(t, c)
	}
	if c.Status(l).Term < 1 {
		t.Fatalf("leader at term %d", c.Status(l).Term)
	}
	c.Crash(l)
	if err := c.Store(l).Save(memberstate.Durable{Term: 0}); err != nil {
		t.Fatal(err)
	}
	c.Restart(l)
	err := c.Run(time.Second)
	var v *Violation
	if !errors.As(err, &v) || v.Invariant != "S3" {
		t.Fatalf("Run after a lost term: %v, want an S3 violation", err)
	}
	if c.Err() != err {
		t.Fatalf("Err() = %v, want the violation", c.Err())
	}
}

// A stopped member makes no pass and reads nothing until it resumes; then it reads what waited.
func TestClusterStopHoldsAMember(t *testing.T) {
	cfg := dledger.DefaultConfig()
	c := newTestCluster(t, ClusterOptions{Seed: 2, Config: cfg})
	l := awaitLeading(t, c)
	if err := c.Run(cfg.DetectionWindow()); err != nil {
		t.Fatal(err)
	}
	f := c.IDs()[(indexOf(c, l)+1)%3]
	c.Events(f)
	before := c.Status(f)
	c.Stop(f)
	if err := c.Run(3 * cfg.DetectionWindow()); err != nil {
		t.Fatal(err)
	}
	// Stopped for three detection windows, it has not timed out: it made no pass.
	if st := c.Status(f); st.Role != before.Role || st.Term != before.Term || st.LastHeartBeat != before.LastHeartBeat {
		t.Fatalf("a stopped member changed: %v at %d (last heartbeat %v) -> %v at %d (%v)",
			before.Role, before.Term, before.LastHeartBeat, st.Role, st.Term, st.LastHeartBeat)
	}
	c.Resume(f, false) // the held heartbeats first: it still follows
	if st := c.Status(f); st.Role != protocol.FOLLOWER || st.LastHeartBeat == before.LastHeartBeat {
		t.Fatalf("after the resume it read no held heartbeat: %v, last heartbeat %v", st.Role, st.LastHeartBeat)
	}
	if evs := c.Events(f); len(evs) != 0 {
		t.Fatalf("role events while stopped and resumed: %+v", evs)
	}
}

// NewCluster refuses options a Run would refuse.
func TestClusterOptionsAreChecked(t *testing.T) {
	for _, o := range []ClusterOptions{{Members: 2}, {Members: 8}, {OneWay: -1}, {RPCTimeout: -1}} {
		o.Config = dledger.DefaultConfig()
		if _, err := NewCluster(o); err == nil {
			t.Errorf("NewCluster(%+v) succeeded", o)
		}
	}
}
