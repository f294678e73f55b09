package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/child"
	"github.com/dledger-go/dledger/server/adminclient"
)

// The replace benchmark behind `dledger bench replace` (issue 31): per trial, a 3-member group
// of real processes on loopback loses a follower to kill -9, and a new process at a new
// address takes its place: started with --join, then added as a non-voter, promoted once its
// ledger has caught up, and the dead member removed, each through the leader's admin API as
// `dledger members` does it. It measures from the add to the new member voting (the promote
// agreed), and the add and the remove alone, and counts leader and term changes over the
// whole replacement, which must be none.

// ReplaceOptions are the flags of `dledger bench replace`.
type ReplaceOptions struct {
	Trials   int
	Profile  string
	Binary   string // "": this executable
	LogLevel string
	Keep     bool      // keep the work dir even on success
	Out      io.Writer // progress and summary lines; nil: none
}

// ReplaceReport is the summary line and the work dir when it was kept.
type ReplaceReport struct {
	Summary string
	Dir     string
}

// replaceTrial is one replacement's measurements.
type replaceTrial struct {
	add, voting, remove time.Duration
	promote             time.Duration // the promote call that was agreed, alone
	changes             int           // leader or term changes seen over the replacement
}

// RunReplace runs the benchmark.
func RunReplace(ctx context.Context, ro ReplaceOptions) (ReplaceReport, error) {
	o := Options{Members: 3, Trials: ro.Trials, Scenario: ScenarioCrash, Profile: ro.Profile, Binary: ro.Binary,
		Poll: 5 * time.Millisecond, LogLevel: ro.LogLevel, Group: "bench"}
	if err := o.Resolve(); err != nil {
		return ReplaceReport{}, &OptionsError{err}
	}
	out := writerOr(ro.Out)
	dir, err := os.MkdirTemp("", "dledger-bench-replace-")
	if err != nil {
		return ReplaceReport{}, err
	}
	fmt.Fprintf(out, "bench: replace, 3 members, profile %s (heartbeat %v), %d trials; binary %s; logs in %s\n",
		o.Profile, o.cfg.HeartBeatInterval, o.Trials, o.Binary, dir)
	var trials []replaceTrial
	var runErr error
	for i := 1; i <= o.Trials && runErr == nil && ctx.Err() == nil; i++ {
		var r replaceTrial
		r, runErr = replaceOnce(ctx, o, dir, i)
		if runErr == nil {
			trials = append(trials, r)
			fmt.Fprintf(out, "trial %d: add %.1f ms, voting %.1f ms after the add (the promote agreed in %.1f ms), remove %.1f ms, leader/term changes %d\n",
				i, Ms(r.add), Ms(r.voting), Ms(r.promote), Ms(r.remove), r.changes)
		}
	}
	rep := ReplaceReport{Summary: replaceSummary(o, trials), Dir: dir}
	fmt.Fprintln(out, rep.Summary)
	switch {
	case ctx.Err() != nil:
		return rep, Interrupted(dir)
	case runErr != nil:
		return rep, &IncompleteError{Err: runErr, Dir: dir}
	case !ro.Keep:
		os.RemoveAll(dir)
		rep.Dir = ""
	}
	return rep, nil
}

// replaceSummary is the last line: medians and maxima in ms, and the changes seen.
func replaceSummary(o Options, ts []replaceTrial) string {
	var add, voting, promote, remove []time.Duration
	changes := 0
	for _, t := range ts {
		add, voting, remove = append(add, t.add), append(voting, t.voting), append(remove, t.remove)
		promote = append(promote, t.promote)
		changes += t.changes
	}
	return fmt.Sprintf("bench: scenario=replace members=3 profile=%s trials=%d heartbeat_ms=%.0f add_p50_ms=%.1f "+
		"voting_p50_ms=%.1f voting_p90_ms=%.1f voting_max_ms=%.1f promote_p50_ms=%.1f remove_p50_ms=%.1f leader_or_term_changes=%d",
		o.Profile, len(ts), Ms(o.cfg.HeartBeatInterval), Percentile(add, 50), Percentile(voting, 50),
		Percentile(voting, 90), Percentile(voting, 100), Percentile(promote, 50), Percentile(remove, 50), changes)
}

// replaceOnce is one trial on a fresh group.
func replaceOnce(ctx context.Context, o Options, dir string, trial int) (replaceTrial, error) {
	c := NewCluster(o, dir)
	defer c.Shutdown()
	stop := context.AfterFunc(ctx, c.Shutdown)
	defer stop()
	if err := c.Layout(fmt.Sprintf("trial-%d", trial)); err != nil {
		return replaceTrial{}, err
	}
	if err := c.StartAll(); err != nil {
		return replaceTrial{}, err
	}
	h := New(o, c)
	leader, _, err := h.AwaitStable(ctx, Leader{})
	if err != nil {
		return replaceTrial{}, fmt.Errorf("trial %d: %w", trial, err)
	}
	li := c.Index(leader.ID)
	dead := (li + 1) % 3
	if err := c.Kill(dead); err != nil {
		return replaceTrial{}, err
	}
	joiner, err := c.StartJoiner("n3", dead)
	if err != nil {
		return replaceTrial{}, err
	}
	r, err := replaceMember(ctx, o, c, li, dead, joiner)
	if err != nil {
		return r, fmt.Errorf("trial %d: %w", trial, err)
	}
	// Terms only grow and a term has one leader: the same leader in the same term now means no
	// change of either happened during the replacement.
	for _, i := range []int{li, (li + 2) % 3, joiner} {
		st, err := h.poller.status(ctx, c.Members[i].HTTPAddr)
		if err != nil {
			return r, fmt.Errorf("trial %d: status of %s: %w", trial, c.Members[i].ID, err)
		}
		if (Leader{st.LeaderID, st.Term}) != leader {
			r.changes++
			c.Note("%s sees %s@%d after the replacement, was %s", c.Members[i].ID, st.LeaderID, st.Term, leader)
		}
	}
	return r, nil
}

// replaceMember adds the joiner, promotes it as soon as it has caught up and removes the dead
// member, through the leader li's admin API, timing each step.
func replaceMember(ctx context.Context, o Options, c *Cluster, li, dead, joiner int) (replaceTrial, error) {
	admin := &adminclient.Client{Addr: c.Members[li].HTTPAddr, HTTP: &http.Client{Timeout: o.GenerousBound()}}
	deadline := time.Now().Add(o.GenerousBound())
	var r replaceTrial
	id := c.Members[joiner].ID
	t0 := time.Now()
	if _, err := admin.MemberAdd(ctx, id, c.Members[joiner].RPCAddr); err != nil {
		return r, fmt.Errorf("add: %w", err)
	}
	r.add = time.Since(t0)
	for {
		tp := time.Now()
		_, err := admin.MemberPromote(ctx, id)
		if err == nil {
			r.promote = time.Since(tp)
			break
		}
		var me *adminclient.MembershipError
		if !errors.As(err, &me) || me.Result.Reason != adminclient.ReasonNotCaughtUp || time.Now().After(deadline) {
			return r, fmt.Errorf("promote: %w", err)
		}
		time.Sleep(o.Poll) // polling interval: the leader learns the ledger from heartbeat answers
	}
	r.voting = time.Since(t0)
	t1 := time.Now()
	m, err := admin.MemberRemove(ctx, c.Members[dead].ID)
	if err != nil {
		return r, fmt.Errorf("remove: %w", err)
	}
	r.remove = time.Since(t1)
	if got, want := voterIDs(m), voterList(c, dead, joiner); got != want {
		return r, fmt.Errorf("voters after the replacement: %s, want %s", got, want)
	}
	return r, nil
}

// voterIDs lists a configuration's voters, sorted as the members list them.
func voterIDs(m adminclient.MembershipJSON) string {
	var ids []string
	for _, p := range m.Members {
		if p.Kind == adminclient.KindVoter {
			ids = append(ids, p.ID)
		}
	}
	return strings.Join(ids, ",")
}

// voterList is the voters expected after the replacement: the original members but dead, then
// the joiner.
func voterList(c *Cluster, dead, joiner int) string {
	var ids []string
	for i := 0; i < 3; i++ {
		if i != dead {
			ids = append(ids, c.Members[i].ID)
		}
	}
	return strings.Join(append(ids, c.Members[joiner].ID), ",")
}

// StartJoiner starts a new member id at new loopback ports with --join, naming itself and the
// group's members but skip (dead) in --peers, and returns its slot.
func (c *Cluster) StartJoiner(id string, skip int) (int, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("benchmark is shutting down")
	}
	base := filepath.Dir(c.Members[0].DataDir)
	m := &Member{ID: id,
		RPCAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		DataDir:  filepath.Join(base, id),
		Proc:     child.Proc{LogPath: filepath.Join(base, id+".log")},
	}
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		return 0, err
	}
	peers := []string{id + "-" + m.RPCAddr}
	for i, o := range c.Members {
		if i != skip {
			peers = append(peers, o.ID+"-"+o.RPCAddr)
		}
	}
	argv := []string{c.opts.Binary, "server", "--join", "--group", c.opts.Group, "--id", id,
		"--peers", strings.Join(peers, ";"), "--data-dir", m.DataDir, "--http", m.HTTPAddr, "--key-file", c.keyFile,
		"--profile", c.opts.Profile, "--log-level", c.opts.LogLevel}
	marker := fmt.Sprintf("=== bench: start %s (--join) at %s", id, time.Now().Format(time.RFC3339Nano))
	if err := m.Start(exec.Command(argv[0], argv[1:]...), marker); err != nil {
		return 0, fmt.Errorf("start %s: %w", id, err)
	}
	c.Members = append(c.Members, m)
	c.Note("start %s (--join) pid %d", id, m.Pid())
	return len(c.Members) - 1, nil
}
