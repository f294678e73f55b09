//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// memberNet puts each broker in its own network namespace so the nemesis can partition the
// election and replication traffic between members. The method is the partition test's and
// the lab's (cmd/dledger/partition_test.go, cmd/dledger-lab/internal/calm): one namespace per
// member with a veth into a bridge in the test's namespace, and a cut made with policy routing
// (iproute2 only): in each namespace the local-lookup rule moves from priority 0 to 100, and
// "from <b's address> blackhole" at priority 10 in a's namespace makes a discard b's packets,
// silently. The bridge has an address, so the test reaches every member's HTTP API whatever
// the cuts between members. Needs root and the ip command.
type memberNet struct {
	prefix string
	ns     []string
	ips    []string
	links  []string
	mu     sync.Mutex
	rules  map[[2]int]bool // (a, b): a discards b's packets
}

const netPrefix = "dn" // short: a link name is at most 15 bytes (dn<pid>s<octet>br)

func newMemberNet(n int) (*memberNet, error) {
	if os.Getenv("DLEDGER_NEMESIS_NETNS") == "0" {
		return nil, errors.New("DLEDGER_NEMESIS_NETNS=0")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("needs the ip command (iproute2)")
	}
	removeStaleNets()
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	m := &memberNet{prefix: fmt.Sprintf("%s%d", netPrefix, os.Getpid()), rules: map[[2]int]bool{}}
	// Two clusters of one test process (3 and 5 members) may exist one after the other: the
	// subnet's last octet keeps their names apart.
	m.prefix += "s" + subnet[strings.LastIndex(subnet, ".")+1:]
	bridge := m.prefix + "br"
	if err := ipCmd("link", "add", bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("can not create a bridge: %v", err)
	}
	m.links = append(m.links, bridge)
	fail := func(err error) (*memberNet, error) {
		m.close()
		return nil, err
	}
	for _, args := range [][]string{{"addr", "add", subnet + ".254/24", "dev", bridge}, {"link", "set", bridge, "up"}} {
		if err := ipCmd(args...); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("%sn%d", m.prefix, i)
		if err := ipCmd("netns", "add", ns); err != nil {
			return fail(fmt.Errorf("can not create a network namespace: %v", err))
		}
		m.ns = append(m.ns, ns)
		host, inner := fmt.Sprintf("%sh%d", m.prefix, i), fmt.Sprintf("%si%d", m.prefix, i)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		m.ips = append(m.ips, ip)
		if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", inner); err != nil {
			return fail(err)
		}
		m.links = append(m.links, host)
		for _, args := range [][]string{
			{"link", "set", inner, "netns", ns},
			{"link", "set", host, "master", bridge, "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", inner},
			{"-n", ns, "link", "set", inner, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "rule", "add", "pref", "100", "lookup", "local"},
			{"-n", ns, "rule", "del", "pref", "0"},
		} {
			if err := ipCmd(args...); err != nil {
				return fail(err)
			}
		}
	}
	if err := m.drop(0, 1, "add"); err != nil {
		return fail(fmt.Errorf("policy routing blackhole rules do not work here: %v", err))
	}
	if err := m.drop(0, 1, "del"); err != nil {
		return fail(err)
	}
	return m, nil
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// freeSubnet picks a 10.216.x.0/24 no interface uses (the partition test and the lab use
// other ranges).
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip addr show: %v", err)
	}
	start := os.Getpid() % 250
	for i := 0; i < 250; i++ {
		s := fmt.Sprintf("10.216.%d", (start+i)%250)
		if !strings.Contains(string(out), " "+s+".") {
			return s, nil
		}
	}
	return "", errors.New("no free 10.216.x.0/24 subnet")
}

var staleName = regexp.MustCompile(`^` + netPrefix + `(\d+)s\d+(br|h\d+|n\d+)$`)

// removeStaleNets deletes the namespaces and links of test processes that no longer run.
func removeStaleNets() {
	stale := func(name string) bool {
		m := staleName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return pid != os.Getpid() && errors.Is(err, os.ErrNotExist)
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
				_ = ipCmd("netns", "del", f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if stale(name) {
				_ = ipCmd("link", "del", name)
			}
		}
	}
}

func (m *memberNet) close() {
	for _, ns := range m.ns {
		_ = ipCmd("netns", "del", ns)
	}
	for i := len(m.links) - 1; i >= 0; i-- {
		_ = ipCmd("link", "del", m.links[i])
	}
	m.ns, m.links = nil, nil
}

// drop adds or deletes the rule that makes a discard packets from b.
func (m *memberNet) drop(a, b int, op string) error {
	return ipCmd("-n", m.ns[a], "rule", op, "pref", "10", "from", m.ips[b], "blackhole")
}

// deaf makes a discard b's packets (one direction), remembered for healAll.
func (m *memberNet) deaf(a, b int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rules[[2]int{a, b}] {
		return nil
	}
	if err := m.drop(a, b, "add"); err != nil {
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
		errs = append(errs, m.drop(r[0], r[1], "del"))
		delete(m.rules, r)
	}
	return errors.Join(errs...)
}

// wrap runs argv in member i's namespace: `ip netns exec` execs it in place, so the pid and
// the signals are the broker's own.
func (m *memberNet) wrap(i int, argv []string) []string {
	return append([]string{"ip", "netns", "exec", m.ns[i]}, argv...)
}
