package calm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Linux parts of the calm scenarios: resetting a live process's TCP connections
// (leader-resets) and starving one of CPU (cpu-starved).

// tcpConn is one TCP socket from /proc/<pid>/net/tcp.
type tcpConn struct {
	inode        uint64
	lport, rport int
	established  bool
}

// parseProcNetTCP reads the kernel's TCP socket table (/proc/net/tcp or tcp6): ports are hex
// after the last ':' of the address fields, state 01 is ESTABLISHED, the inode is field 10.
func parseProcNetTCP(r io.Reader) ([]tcpConn, error) {
	var out []tcpConn
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		lp, err1 := hexPort(f[1])
		rp, err2 := hexPort(f[2])
		ino, err3 := strconv.ParseUint(f[9], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("bad socket line %q: %v", sc.Text(), err)
		}
		out = append(out, tcpConn{inode: ino, lport: lp, rport: rp, established: f[3] == "01"})
	}
	return out, sc.Err()
}

func hexPort(addr string) (int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("no port in %q", addr)
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	return int(p), err
}

// socketInodes lists the inodes of the sockets process pid has open.
func socketInodes(pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out[ino] = true
			}
		}
	}
	return out, nil
}

// processConns lists the established TCP connections of process pid, except those on local
// port skip (the status listener the benchmark polls).
func processConns(pid, skip int) ([]tcpConn, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var out []tcpConn
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue // no IPv6
		}
		conns, err := parseProcNetTCP(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			if c.established && inodes[c.inode] && c.lport != skip {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// ssKillArgs is the `ss -K` command line that destroys exactly these sockets (by local and
// remote port; on loopback both ends are 127.0.0.1, and a port pair names one direction of
// one connection).
func ssKillArgs(conns []tcpConn) []string {
	args := []string{"-K", "-t", "-n", "state", "established"}
	for i, c := range conns {
		if i > 0 {
			args = append(args, "or")
		}
		args = append(args, "(", "sport", "=", fmt.Sprintf(":%d", c.lport), "and", "dport", "=", fmt.Sprintf(":%d", c.rport), ")")
	}
	return args
}

// resetConns destroys the process's end of every connection with `ss -K`: the kernel aborts
// the socket (the process's next read or write fails with ECONNABORTED) and sends the peer a
// RST (its side fails with ECONNRESET), while the process lives on. It needs CAP_NET_ADMIN
// and a kernel built with CONFIG_INET_DIAG_DESTROY; without them ss destroys nothing, which
// is reported as an error. It returns how many sockets were destroyed.
func resetConns(conns []tcpConn) (int, error) {
	if len(conns) == 0 {
		return 0, nil
	}
	out, err := exec.Command("ss", ssKillArgs(conns)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ss -K: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// ss prints a header and one line per socket it destroyed.
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("ss -K destroyed no socket: needs root and a kernel with CONFIG_INET_DIAG_DESTROY")
	}
	return n, nil
}

// checkConnReset says why leader-resets can not run here, or nil.
func checkConnReset() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (CAP_NET_ADMIN) to destroy another process's sockets with ss -K")
	}
	if _, err := exec.LookPath("ss"); err != nil {
		return errors.New("needs the ss command (iproute2)")
	}
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		return errors.New("needs /proc/<pid>/net/tcp to find the leader's sockets")
	}
	return nil
}

// cpuCgroup is a cgroup that limits its processes to a share of one CPU: cgroup v2 cpu.max
// where the unified hierarchy has the cpu controller, else cgroup v1 cpu.cfs_quota_us.
type cpuCgroup struct {
	dir string
	v2  bool
}

// cgroupName is the directory's name; the pid follows, so a stale one (a benchmark killed
// before its cleanup) can be told from a live run's and removed.
const cgroupName = "dledger-calm-"

// newCPUCgroup creates the cgroup with quota/period, or says why it can not.
func newCPUCgroup(quota, period time.Duration) (*cpuCgroup, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root to create a cgroup")
	}
	root, v2, err := cpuHierarchy()
	if err != nil {
		return nil, err
	}
	removeStaleCgroups(root)
	g := &cpuCgroup{dir: filepath.Join(root, fmt.Sprintf("%s%d", cgroupName, os.Getpid())), v2: v2}
	if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup %s not writable: %v", root, err)
	}
	q, p := quota.Microseconds(), period.Microseconds()
	if v2 {
		err = writeFile(filepath.Join(g.dir, "cpu.max"), fmt.Sprintf("%d %d", q, p))
	} else {
		err = errors.Join(writeFile(filepath.Join(g.dir, "cpu.cfs_period_us"), strconv.FormatInt(p, 10)),
			writeFile(filepath.Join(g.dir, "cpu.cfs_quota_us"), strconv.FormatInt(q, 10)))
	}
	if err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// cpuHierarchy finds where to create a cpu-limited cgroup: the cgroup2 mount if its root
// offers the cpu controller (enabling it for children if needed), else the cgroup v1 mount
// with the cpu controller.
func cpuHierarchy() (string, bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	var v1 string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		mnt := f[4]
		switch g[0] {
		case "cgroup2":
			ctl, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers"))
			if err == nil && hasWord(string(ctl), "cpu") {
				sub, _ := os.ReadFile(filepath.Join(mnt, "cgroup.subtree_control"))
				if hasWord(string(sub), "cpu") || writeFile(filepath.Join(mnt, "cgroup.subtree_control"), "+cpu") == nil {
					return mnt, true, nil
				}
			}
		case "cgroup":
			if hasWord(strings.ReplaceAll(g[2], ",", " "), "cpu") && v1 == "" {
				v1 = mnt
			}
		}
	}
	if v1 != "" {
		return v1, false, nil
	}
	return "", false, errors.New("no cgroup hierarchy with the cpu controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)")
}

func hasWord(s, w string) bool {
	for _, x := range strings.Fields(s) {
		if x == w {
			return true
		}
	}
	return false
}

var staleCgroup = regexp.MustCompile(`^` + cgroupName + `(\d+)$`)

// removeStaleCgroups removes the (empty) cgroups of benchmarks that no longer run.
func removeStaleCgroups(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if m := staleCgroup.FindStringSubmatch(e.Name()); m != nil {
			if _, err := os.Stat("/proc/" + m[1]); errors.Is(err, os.ErrNotExist) {
				_ = os.Remove(filepath.Join(root, e.Name()))
			}
		}
	}
}

// add moves process pid (all its threads) into the cgroup.
func (g *cpuCgroup) add(pid int) error {
	return writeFile(filepath.Join(g.dir, "cgroup.procs"), strconv.Itoa(pid))
}

// release moves process pid back to the hierarchy's root cgroup, out of the limit.
func (g *cpuCgroup) release(pid int) error {
	return writeFile(filepath.Join(filepath.Dir(g.dir), "cgroup.procs"), strconv.Itoa(pid))
}

// throttled reads how often the limit bit: periods, throttled periods, time throttled.
func (g *cpuCgroup) throttled() (periods, throttled int64, d time.Duration) {
	b, _ := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		case "throttled_time": // v1, ns
			d = time.Duration(n)
		case "throttled_usec": // v2
			d = time.Duration(n) * time.Microsecond
		}
	}
	return periods, throttled, d
}

// remove deletes the cgroup; its processes must have exited (a cgroup with members can not be
// removed), so the caller stops them first. The kernel may need a moment after the last
// process is reaped.
func (g *cpuCgroup) remove() {
	for i := 0; i < 50; i++ {
		if err := os.Remove(g.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *cpuCgroup) String() string {
	if g.v2 {
		return "cgroup v2 cpu.max at " + g.dir
	}
	return "cgroup v1 cpu.cfs_quota_us at " + g.dir
}
