//go:build linux

package main

import (
	"errors"
	"os"
	"sync"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// memberNet puts each broker in its own network namespace (harness.MemberNet, the lab's and
// the partition test's method) so the nemesis can partition the election and replication
// traffic between members; it remembers the one-way cuts it made, for healAll. The bridge has
// an address, so the test reaches every member's HTTP API whatever the cuts between members.
type memberNet struct {
	*harness.MemberNet
	ips   []string
	mu    sync.Mutex
	rules map[[2]int]bool // (a, b): a discards b's packets
}

func newMemberNet(n int) (*memberNet, error) {
	if os.Getenv("DLEDGER_NEMESIS_NETNS") == "0" {
		return nil, errors.New("DLEDGER_NEMESIS_NETNS=0")
	}
	// 10.216.x: the partition test and the lab use other ranges.
	mn, err := harness.NewMemberNet(n, "dn", "10.216")
	if err != nil {
		return nil, err
	}
	return &memberNet{MemberNet: mn, ips: mn.IPs, rules: map[[2]int]bool{}}, nil
}

func (m *memberNet) close() { m.Close() }

// deaf makes a discard b's packets (one direction), remembered for healAll.
func (m *memberNet) deaf(a, b int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rules[[2]int{a, b}] {
		return nil
	}
	if err := m.Drop(a, b, "add"); err != nil {
		return err
	}
	m.rules[[2]int{a, b}] = true
	return nil
}

// healAll deletes every rule deaf added.
func (m *memberNet) healAll() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for r := range m.rules {
		errs = append(errs, m.Drop(r[0], r[1], "del"))
		delete(m.rules, r)
	}
	return errors.Join(errs...)
}

// wrap runs argv in member i's namespace: `ip netns exec` execs it in place, so the pid and
// the signals are the broker's own.
func (m *memberNet) wrap(i int, argv []string) []string {
	return append([]string{"ip", "netns", "exec", m.NS[i]}, argv...)
}
