package compare

import (
	"github.com/dledger-go/dledger/cmd/internal/harness"

	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// launch starts a system's group and waits until it is steady.
func (r *runner) launch(ctx context.Context, set string, sys system, rw *row) (*contender, error) {
	g, err := newGroup(sys, filepath.Join(r.dir, set, rw.system), Members)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("benchmark is shutting down")
	}
	r.groups = append(r.groups, g)
	r.mu.Unlock()
	c := &contender{g: g, row: rw, client: newClient()}
	if err := g.startAll(); err != nil {
		g.shutdown()
		return nil, err
	}
	if c.leader, c.idx, err = r.awaitSteady(ctx, c); err != nil {
		g.shutdown()
		return nil, fmt.Errorf("the group never became steady: %w", err)
	}
	fmt.Fprintf(r.out, "%s %s: %d members steady, leader %s; %s\n", set, rw.system, Members, c.leader, rw.setting)
	return c, nil
}

// newClient keeps one connection per member alive, so a poll is one request on an open socket,
// not a TCP handshake; the short timeout keeps a slow member from delaying the next poll.
func newClient() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &http.Client{Transport: tr, Timeout: 250 * time.Millisecond}
}

// measureIdle samples every member's CPU time across the idle window, all groups at once
// and nobody polling them, and their RSS at its end.
func (r *runner) measureIdle(ctx context.Context, set string, cs []*contender) error {
	if len(cs) == 0 || r.opts.Idle == 0 {
		return nil
	}
	fmt.Fprintf(r.out, "%s: idle: %v warm-up, then CPU time over %v with every group idle\n", set, r.opts.IdleWarmup, r.opts.Idle)
	if err := sleep(ctx, r.opts.IdleWarmup); err != nil {
		return err
	}
	type sample struct {
		pid int
		cpu float64
	}
	start := make([][]sample, len(cs))
	t0 := time.Now()
	for k, c := range cs {
		for i := 0; i < c.g.size(); i++ {
			pid := c.g.pid(i)
			cpu, _, err := readUsage(pid)
			if err != nil {
				return fmt.Errorf("%s member %d: %w", c.row.system, i, err)
			}
			start[k] = append(start[k], sample{pid, cpu})
		}
	}
	if err := sleep(ctx, r.opts.Idle); err != nil {
		return err
	}
	wall := time.Since(t0).Seconds()
	for k, c := range cs {
		for i, s := range start[k] {
			if pid := c.g.pid(i); pid != s.pid {
				return fmt.Errorf("%s member %d restarted during the idle window", c.row.system, i)
			}
			cpu, rss, err := readUsage(s.pid)
			if err != nil {
				return fmt.Errorf("%s member %d: %w", c.row.system, i, err)
			}
			c.row.idleCPU = append(c.row.idleCPU, (cpu-s.cpu)/wall)
			c.row.rss = append(c.row.rss, rss)
		}
		fmt.Fprintf(r.out, "%s %s: idle CPU %.2f %% of a core per member, RSS %.1f MiB per member\n",
			set, c.row.system, c.row.idlePercent(), c.row.rssMiB())
	}
	return nil
}

// errLeaderMoved: the leader changed while the group was idle before the kill; counted
// (idle_changes) and the trial redone. errUnconfirmed: the leader did not answer the check
// just before the kill (a busy machine can stall a JVM past the poll timeout); the trial is
// redone without counting anything.
var (
	errLeaderMoved = errors.New("the leader changed while the group was idle")
	errUnconfirmed = errors.New("the leader did not confirm its leadership just before the kill")
)

// maxRedos bounds the redone trials per trial: a group that keeps moving or stalling cannot
// be measured.
const maxRedos = 5

// trial kills the leader at a random point of its heartbeat cycle and measures until a
// quorum of the group names a new leader, then restarts the killed member and waits until the
// group is steady again. It returns the progress text; an error means the system cannot go on.
func (r *runner) trial(ctx context.Context, c *contender) (string, error) {
	if err := sleep(ctx, r.opts.Gap); err != nil {
		return "", err
	}
	for redo := 0; ; redo++ {
		res, err := r.killAndMeasure(ctx, c)
		if (errors.Is(err, errLeaderMoved) || errors.Is(err, errUnconfirmed)) && redo < maxRedos {
			if errors.Is(err, errLeaderMoved) {
				c.row.idleChanges++
			}
			fmt.Fprintf(r.out, "%s %s: %v; waiting for a steady group and trying again\n", c.row.set, c.row.system, err)
			if c.leader, c.idx, err = r.awaitSteady(ctx, c); err != nil {
				return "", err
			}
			continue
		}
		return res, err
	}
}

func (r *runner) killAndMeasure(ctx context.Context, c *contender) (string, error) {
	if err := sleep(ctx, time.Duration(rand.Int64N(int64(c.g.sys.cycle())))); err != nil {
		return "", err
	}
	old, target := c.leader, c.idx
	v, err := c.g.sys.probe(ctx, c.client, target)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: member %d: %v", errUnconfirmed, target, err)
	case !v.isLeader || v.leader != old:
		return "", fmt.Errorf("%w: member %d no longer leads as %s (%+v)", errLeaderMoved, target, old, v)
	}
	t0 := time.Now()
	if err := c.g.kill(target); err != nil {
		return "", err
	}
	r.note("%s %s: kill -9 member %d (leader %s)", c.row.set, c.row.system, target, old)
	latest := map[int]view{}
	var agreed string
	var at time.Time
	err = r.watch(ctx, c, c.g.others(target), r.opts.Poll, t0.Add(c.g.sys.bound()), func(a answer) bool {
		if a.err != nil {
			delete(latest, a.idx) // not answering: it counts for nobody
			return false
		}
		c.row.pollSum += a.rtt
		c.row.pollN++
		latest[a.idx] = a.v
		agreed, _ = agreedLeader(latest, c.g.size(), old)
		at = a.at
		return agreed != ""
	})
	res := ""
	switch {
	case errors.Is(err, errDeadline):
		c.row.failed++
		res = fmt.Sprintf("FAILED: no quorum named a new leader within %v (%v)", c.g.sys.bound(), latest)
	case err != nil:
		return "", err
	default:
		d := at.Sub(t0)
		c.row.elapsed = append(c.row.elapsed, d)
		res = fmt.Sprintf("%8.1f ms  %s -> %s", harness.Ms(d), old, agreed)
		r.note("%s %s: a quorum names %s, %.1f ms after the kill", c.row.set, c.row.system, agreed, harness.Ms(d))
	}
	if err := c.g.start(target); err != nil {
		return "", err
	}
	r.note("%s %s: restart member %d", c.row.set, c.row.system, target)
	leader, idx, err := r.awaitSteady(ctx, c)
	if err != nil {
		return "", fmt.Errorf("after restarting member %d: %w", target, err)
	}
	if agreed != "" && leader != agreed {
		c.row.rejoinChanges++
		res += fmt.Sprintf("  (the restarted member's return moved leadership to %s)", leader)
	}
	c.leader, c.idx = leader, idx
	return res, nil
}

// note appends a timestamped line to events.log in the work dir, to lay beside the member
// logs when a trial needs explaining. It is a diagnostic aid: errors are ignored.
func (r *runner) note(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(r.dir, "events.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), fmt.Sprintf(format, args...))
}

// answer is one member's reply, stamped when it arrived, with the poll's round trip: the
// member's state was taken at most that long before.
type answer struct {
	idx int
	at  time.Time
	rtt time.Duration
	v   view
	err error
}

var errDeadline = errors.New("deadline passed")

// watch polls members idxs (each from its own goroutine, every period) and hands every answer
// to fn on the caller's goroutine until fn returns true (nil), the deadline passes
// (errDeadline), ctx ends, or a member exits on its own.
func (r *runner) watch(ctx context.Context, c *contender, idxs []int, period time.Duration, deadline time.Time, fn func(answer) bool) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out := make(chan answer)
	for _, i := range idxs {
		go func(i int) {
			for {
				start := time.Now()
				v, err := c.g.sys.probe(ctx, c.client, i)
				select {
				case out <- answer{idx: i, at: time.Now(), rtt: time.Since(start), v: v, err: err}:
				case <-ctx.Done():
					return
				}
				if sleep(ctx, period-time.Since(start)) != nil {
					return
				}
			}
		}(i)
	}
	check := time.NewTicker(20 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case a := <-out:
			if fn(a) {
				return nil
			}
		case <-check.C:
			if err := c.g.unexpectedExit(); err != nil {
				return err
			}
		case <-ctx.Done():
			if !time.Now().Before(deadline) {
				return errDeadline
			}
			return ctx.Err()
		}
	}
}

// steadyPoll is the polling period while waiting for a steady group: nothing is being timed.
const steadyPoll = 10 * time.Millisecond

// awaitSteady waits until every member answers and all name one leader, which leads, without
// a break for one heartbeat period (at least 200 ms), so the next kill hits a group in its
// steady state.
func (r *runner) awaitSteady(ctx context.Context, c *contender) (string, int, error) {
	latest := map[int]view{}
	var since time.Time
	var leader string
	idx := -1
	hold := max(c.g.sys.cycle(), 200*time.Millisecond)
	bound := c.g.sys.bound()
	err := r.watch(ctx, c, c.g.others(-1), steadyPoll, time.Now().Add(bound), func(a answer) bool {
		if a.err != nil {
			delete(latest, a.idx)
			since = time.Time{}
			return false
		}
		latest[a.idx] = a.v
		l, i, ok := unanimous(latest, c.g.size())
		switch {
		case !ok:
			since = time.Time{}
		case since.IsZero() || l != leader:
			since, leader, idx = a.at, l, i
		}
		return ok && a.at.Sub(since) >= hold
	})
	if errors.Is(err, errDeadline) {
		return "", -1, fmt.Errorf("not steady within %v (last answers %v)", bound, latest)
	}
	return leader, idx, err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
