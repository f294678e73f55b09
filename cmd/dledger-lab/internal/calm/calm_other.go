//go:build !linux

package calm

import (
	"errors"
	"time"
)

// The leader-resets and cpu-starved scenarios need Linux (/proc, ss -K, cgroups); elsewhere
// they are skipped with this reason.
var errLinuxOnly = errors.New("implemented for Linux only")

type tcpConn struct {
	inode        uint64
	lport, rport int
	established  bool
}

func processConns(pid, skip int) ([]tcpConn, error) { return nil, errLinuxOnly }
func resetConns(conns []tcpConn) (int, error)       { return 0, errLinuxOnly }
func checkConnReset() error                         { return errLinuxOnly }

type cpuCgroup struct{}

func newCPUCgroup(quota, period time.Duration) (*cpuCgroup, error) { return nil, errLinuxOnly }
func (g *cpuCgroup) add(pid int) error                             { return errLinuxOnly }
func (g *cpuCgroup) release(pid int) error                         { return errLinuxOnly }
func (g *cpuCgroup) throttled() (int64, int64, time.Duration)      { return 0, 0, 0 }
func (g *cpuCgroup) remove()                                       {}
func (g *cpuCgroup) String() string                                { return "" }
