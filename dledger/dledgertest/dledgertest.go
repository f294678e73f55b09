// Package dledgertest holds the helpers the project's tests share: loopback ports, peer
// strings, a manual clock, deterministic random sources, polling with generous bounds, and
// the "one leader followed by a quorum" test. It imports nothing from the project, so every
// package's tests can use it, the elector's own included (no import cycle).
package dledgertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Polling bounds: tests assert that something happens, never how fast, so a busy 2-core
// machine running -race does not make them flaky.
const (
	// WaitLimit is a generous default bound for a wait on real time.
	WaitLimit = 20 * time.Second
	// PollEvery is how often Eventually looks again.
	PollEvery = 5 * time.Millisecond
)

// Eventually polls cond every PollEvery until it holds, failing the test with what after limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(PollEvery) // polling interval, not a wait-and-hope
	}
}

// Member is what StableLeader needs to know of one member.
type Member struct {
	ID       string
	Up       bool // running and answering; members that are down count as not following
	Leading  bool // its role is LEADER
	LeaderID string
	Term     int64
}

// StableLeader is the project's one test for "a stable leader followed by a quorum": exactly
// one running member leads, and a quorum of the group (size members, n/2+1) runs and names it
// leader at its term (the leader itself included). ok is false otherwise.
func StableLeader(view []Member, members int) (id string, term int64, ok bool) {
	var leader *Member
	for i := range view {
		if m := &view[i]; m.Up && m.Leading {
			if leader != nil {
				return "", 0, false
			}
			leader = m
		}
	}
	if leader == nil {
		return "", 0, false
	}
	n := 0
	for _, m := range view {
		if m.Up && m.LeaderID == leader.ID && m.Term == leader.Term {
			n++
		}
	}
	if n < members/2+1 {
		return "", 0, false
	}
	return leader.ID, leader.Term, true
}

// AwaitLeader polls view until StableLeader holds for a group of size members, and returns
// that leader and its term; it fails the test after limit.
func AwaitLeader(t testing.TB, limit time.Duration, members int, view func() []Member) (string, int64) {
	t.Helper()
	var id string
	var term int64
	Eventually(t, limit, "one leader followed by a quorum", func() bool {
		var ok bool
		id, term, ok = StableLeader(view(), members)
		return ok
	})
	return id, term
}

// PeersString is the peer list of members n0, n1, ... on loopback at ports, in the form
// "n0-127.0.0.1:port;n1-...".
func PeersString(ports []int) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = fmt.Sprintf("n%d-127.0.0.1:%d", i, p)
	}
	return strings.Join(parts, ";")
}

// Ports are n consecutive port numbers from first: for peer strings no socket is opened on.
func Ports(first, n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ports[i] = first + i
	}
	return ports
}

// Free ports come from below the kernel's ephemeral range, which outgoing connections take
// their local ports from: a port found by listening on :0 and closing it lies in that range,
// and a connection made meanwhile may take it, so the server that binds it later fails with
// "address already in use" (it happened). Below the range, only another listener can take it:
// a port is probed by listening on it, and never handed out twice in one test process;
// choosing at random keeps two test processes (go test runs packages in parallel) apart.
const (
	freeLow         = 20000 // the lowest port handed out
	defaultEphemLow = 32768 // Linux's default when /proc says nothing
)

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// FreePorts returns n distinct loopback TCP ports that nothing listens on, none in the
// ephemeral range (see above), none returned before in this process.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	hi := ephemeralLow()
	if hi-freeLow < 1000 {
		t.Fatalf("the ephemeral port range starts at %d: too few ports below it for tests", hi)
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n+1000 {
			t.Fatalf("found only %d free loopback ports in [%d, %d)", len(ports), freeLow, hi)
		}
		p := freeLow + rand.IntN(hi-freeLow)
		if given[p] || !bindable(p) {
			continue
		}
		given[p] = true
		ports = append(ports, p)
	}
	return ports
}

// bindable says whether a listener can take the loopback port now.
func bindable(p int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemLow
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return defaultEphemLow
	}
	return lo
}

// FakeClock is a manual clock (it has the elector's Clock method, Now). Safe for concurrent use.
type FakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewFakeClock is a clock standing at start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{t: start} }

// Now is the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Rand is a deterministic random source (the elector's Rand method, Int63n): a PCG seeded by
// two numbers. Not safe for concurrent use, like the elector's.
type Rand struct{ r *rand.Rand }

// NewRand is the source for seeds (a, b): equal seeds, equal sequences.
func NewRand(a, b uint64) *Rand { return &Rand{rand.New(rand.NewPCG(a, b))} }

// Int63n is uniform in [0, n).
func (r *Rand) Int63n(n int64) int64 { return r.r.Int64N(n) }

// ConstRand always returns V, capped at n-1: ConstRand{0} makes every random delay its minimum,
// so expected times are exact.
type ConstRand struct{ V int64 }

// Int63n is min(V, n-1).
func (c ConstRand) Int63n(n int64) int64 { return min(c.V, n-1) }
