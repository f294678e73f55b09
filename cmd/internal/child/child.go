// Package child runs the benchmarks' member processes (dledger bench failover, dledger-lab calm and
// compare): each in its own process group, its output appended to a log file after a marker
// line per start, reaped whoever ends it, and on Linux killed by the kernel if the benchmark
// dies without cleaning up, so a benchmark never leaves orphans.
package child

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
)

// LogTimeLayout is the time format of "ts" in a member's JSON log lines (dledger server's
// encoder), shared so that the benchmarks' own timeline lines sort with the members' lines.
const LogTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Proc is one member's process across its incarnations. The caller serializes the calls (the
// benchmarks hold their group's lock); Done may be waited on without it.
type Proc struct {
	LogPath  string
	Cmd      *exec.Cmd     // the current or last incarnation; nil before the first start
	Done     chan struct{} // closed once that incarnation has exited and been reaped
	Expected bool          // the benchmark ended it: its exit is no news
}

// Running reports whether the current incarnation is still alive.
func (p *Proc) Running() bool {
	if p.Cmd == nil {
		return false
	}
	select {
	case <-p.Done:
		return false
	default:
		return true
	}
}

// Start runs cmd as the next incarnation, its output appended to LogPath after marker.
func (p *Proc) Start(cmd *exec.Cmd, marker string) error {
	if p.Running() {
		return fmt.Errorf("already running (pid %d)", p.Cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy of the descriptor
	fmt.Fprintln(logf, marker)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait() // reap it, whoever ends it
		close(done)
	}()
	p.Cmd, p.Done, p.Expected = cmd, done, false
	return nil
}

// Kill sends SIGKILL to the process group (a JVM or etcd and whatever it started; it also ends
// a stopped process) and marks the exit expected. Wait on Done for the reaping.
func (p *Proc) Kill() error {
	if !p.Running() {
		return fmt.Errorf("not running")
	}
	p.Expected = true
	return killGroup(p.Cmd.Process)
}

// Pid of the running incarnation, or 0.
func (p *Proc) Pid() int {
	if !p.Running() {
		return 0
	}
	return p.Cmd.Process.Pid
}

// Unexpected describes an incarnation that ended although nobody killed it ("" if none).
func (p *Proc) Unexpected() string {
	if p.Cmd == nil || p.Expected || p.Running() {
		return ""
	}
	return fmt.Sprintf("exited on its own (%v); last log lines:\n%s", p.Cmd.ProcessState, Tail(p.LogPath, 10))
}

// Tail returns the last n lines of the file at path (or the error reading it).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
