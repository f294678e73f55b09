package daemon

// Hooks: commands a member runs on role changes and when it stops, as keepalived's notify
// scripts and Patroni's on_role_change callbacks, for an application that does not embed the
// member. Config.OnRoleChange runs (with /bin/sh -c) for role events, OnStop once at
// Stop, each with the event in its environment:
//
//	DLEDGER_GROUP DLEDGER_ID DLEDGER_ROLE DLEDGER_TERM DLEDGER_LEADER DLEDGER_SEQ
//	DLEDGER_PREVIOUS_ROLE (the role the hook last ran for; UNKNOWN before the first)
//	DLEDGER_HOOK (on_role_change or on_stop)
//
// The rules, which a fencing script can rely on:
//   - One hook runs at a time, in event order, and never for an event older than the last one
//     a hook ran for.
//   - A newer event cancels a hook still running (SIGTERM to its process group, SIGKILL after
//     hookKillGrace); the hook then runs for the newest event only: events in between are
//     skipped (coalesced), since only the latest role is true.
//   - A hook running past Config.HookTimeout is killed the same way.
//   - Failures are logged and counted (dledger_hook_runs_total{hook,result}); they change
//     nothing else. Hooks run on a goroutine of their own: the member never waits for them,
//     except Stop, which runs the hook for the final event (UNKNOWN) and then OnStop within
//     its ctx (Server.StopTimeout includes their bound), killing them when ctx ends.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/metrics"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// Hook names, as in metrics and DLEDGER_HOOK.
const (
	hookRoleChange = "on_role_change"
	hookStop       = "on_stop"
)

// DefaultHookTimeout is Config.HookTimeout's zero value.
const DefaultHookTimeout = 10 * time.Second

// hookKillGrace is how long a cancelled or timed-out hook has between SIGTERM and SIGKILL (a
// variable so that tests need not wait for it).
var hookKillGrace = 2 * time.Second

// hookOutputTail is how much of a hook's output a failure's log line keeps (the end of it).
const hookOutputTail = 2 << 10

var (
	errHookTimeout    = errors.New("hook timeout")
	errHookSuperseded = errors.New("a newer role event")
	errHookStopBound  = errors.New("Stop's deadline")
)

// hookStopTimeout is what Stop may spend on hooks beyond the hand-over and the close: the
// on-role-change hook for the final event and the on-stop hook, each bounded by the hook
// timeout and the kill grace. It is 0 when d sets no hook.
func hookStopTimeout(d Config) time.Duration {
	if d.OnRoleChange == "" && d.OnStop == "" {
		return 0
	}
	t := d.HookTimeout
	if t <= 0 {
		t = DefaultHookTimeout
	}
	return 2 * (t + 2*hookKillGrace)
}

// resolveHookTimeout checks the hook settings and returns the timeout to use.
func resolveHookTimeout(c Config) (time.Duration, error) {
	for _, h := range []struct{ name, cmd string }{{"on-role-change", c.OnRoleChange}, {"on-stop", c.OnStop}} {
		if strings.ContainsRune(h.cmd, 0) {
			return 0, fmt.Errorf("%s hook: the command contains a NUL byte", h.name)
		}
	}
	switch {
	case c.HookTimeout < 0:
		return 0, fmt.Errorf("hook timeout %v: want a positive duration", c.HookTimeout)
	case c.HookTimeout == 0:
		return DefaultHookTimeout, nil
	}
	return c.HookTimeout, nil
}

// hookObserver counts hook runs (*metrics.Hooks in production).
type hookObserver interface {
	HookRan(hook, result string, d time.Duration)
}

// hookRunner runs the hooks of one member on a goroutine of its own.
type hookRunner struct {
	group, self          string
	onRoleChange, onStop string
	timeout, grace       time.Duration // grace: hookKillGrace when the runner was made
	log                  *zap.Logger
	obs                  hookObserver // nil: not counted
	// series is obs as a daemon member registered it (startHooks), unregistered when the
	// member stops (closeHooks): kept here, not in every member, as few members run hooks.
	series *metrics.Hooks

	base context.Context // every run's parent; kill ends them all (Stop's deadline)
	kill context.CancelCauseFunc

	mu        sync.Mutex
	pending   *dledger.RoleEvent // the newest event not yet taken
	seen      bool               // an event was taken; last and prev are set
	last      dledger.RoleEvent  // the last event taken (its hook ran, or runs)
	prev      protocol.Role      // the role of the event taken before last
	cancelRun context.CancelCauseFunc
	runStop   bool // run OnStop before the loop ends

	wake     chan struct{}
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

func newHookRunner(group, self, onRoleChange, onStop string, timeout time.Duration, log *zap.Logger, obs hookObserver) *hookRunner {
	h := &hookRunner{group: group, self: self, onRoleChange: onRoleChange, onStop: onStop, timeout: timeout, grace: hookKillGrace,
		log: log, obs: obs, prev: protocol.UNKNOWN, last: dledger.RoleEvent{Role: protocol.UNKNOWN},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	h.base, h.kill = context.WithCancelCause(context.Background())
	go h.loop()
	return h
}

// startHooks builds the member's hook runner, if the daemon's config sets a hook, with its
// metrics on reg (attach calls it before subscribing it to the member's role events).
func (m *member) startHooks(reg prometheus.Registerer) error {
	c := m.d.cfg
	var names []string
	if c.OnRoleChange != "" {
		names = append(names, hookRoleChange)
	}
	if c.OnStop != "" {
		names = append(names, hookStop)
	}
	if len(names) == 0 {
		return nil
	}
	obs, err := metrics.NewHooks(reg, m.cfg.Group, m.cfg.SelfID, names)
	if err != nil {
		return fmt.Errorf("hook metrics: %w", err)
	}
	m.hooks = newHookRunner(m.cfg.Group, m.cfg.SelfID, c.OnRoleChange, c.OnStop, c.HookTimeout, m.logger().Named("hooks"), obs)
	m.hooks.series = obs
	return nil
}

// closeHooks ends the hook runner at the member's Stop, after its role-event subscriptions
// were cancelled (the runner has every event). A started member (final set) first runs its
// hooks for the final event. Its metrics are unregistered, so the member can be added again.
func (m *member) closeHooks(ctx context.Context, final *dledger.RoleEvent) {
	if m.hooks == nil {
		return
	}
	m.hooks.finish(ctx, final)
	m.hooks.series.Unregister()
}

// onEvent hands the runner a role event. It never blocks: the event becomes the one to run
// next (an older one not yet run is dropped), and a hook running for an older event is
// cancelled.
func (h *hookRunner) onEvent(ev dledger.RoleEvent) {
	if ev.Missed > 0 {
		return // a marker (the listener fell behind): the current state comes next, and its hook runs
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if (h.seen && ev.Seq <= h.last.Seq) || (h.pending != nil && ev.Seq <= h.pending.Seq) {
		return
	}
	if h.pending != nil {
		h.log.Debug("hook skipped: a newer role event came first", zap.Uint64("seq", h.pending.Seq), zap.Uint64("newer", ev.Seq))
	}
	h.pending = &ev
	if h.cancelRun != nil {
		h.cancelRun(errHookSuperseded)
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hookRunner) loop() {
	defer close(h.done)
	for {
		h.runPending()
		select {
		case <-h.wake:
		case <-h.quit:
			h.runPending()
			h.mu.Lock()
			runStop, ev, prev := h.runStop, h.last, h.prev
			h.mu.Unlock()
			if runStop {
				h.run(h.base, hookStop, h.onStop, ev, prev)
			}
			return
		}
	}
}

// runPending runs the role-change hook for the newest event until none is pending.
func (h *hookRunner) runPending() {
	for {
		h.mu.Lock()
		if h.pending == nil {
			h.mu.Unlock()
			return
		}
		ev, prev := *h.pending, h.last.Role
		h.pending, h.seen, h.last, h.prev = nil, true, ev, prev
		if h.onRoleChange == "" {
			h.mu.Unlock()
			continue
		}
		ctx, cancel := context.WithCancelCause(h.base)
		h.cancelRun = cancel
		h.mu.Unlock()
		h.run(ctx, hookRoleChange, h.onRoleChange, ev, prev)
		h.mu.Lock()
		h.cancelRun = nil
		h.mu.Unlock()
		cancel(nil)
	}
}

// finish ends the runner at Stop. With the member's final event it first runs the role-change
// hook for it (unless it already ran) and then OnStop. If ctx ends first, the running hook is
// killed (SIGTERM, SIGKILL after the grace) and finish returns once it is gone.
func (h *hookRunner) finish(ctx context.Context, final *dledger.RoleEvent) {
	if final != nil {
		h.onEvent(*final)
		h.mu.Lock()
		h.runStop = h.onStop != ""
		h.mu.Unlock()
	}
	h.quitOnce.Do(func() { close(h.quit) })
	select {
	case <-h.done:
	case <-ctx.Done():
		h.kill(errHookStopBound)
		<-h.done
	}
}

// run runs one hook command for ev and logs and counts the result.
func (h *hookRunner) run(ctx context.Context, hook, command string, ev dledger.RoleEvent, prev protocol.Role) {
	ctx, cancel := context.WithTimeoutCause(ctx, h.timeout, errHookTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(),
		"DLEDGER_GROUP="+h.group, "DLEDGER_ID="+h.self, "DLEDGER_ROLE="+ev.Role.String(),
		"DLEDGER_TERM="+strconv.FormatInt(ev.Term, 10), "DLEDGER_LEADER="+ev.LeaderID,
		"DLEDGER_SEQ="+strconv.FormatUint(ev.Seq, 10), "DLEDGER_PREVIOUS_ROLE="+prev.String(),
		"DLEDGER_HOOK="+hook)
	out := &tailBuffer{max: hookOutputTail}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a kill reaches what the script started too.
	setProcessGroup(cmd)
	var termAt time.Time // when the group got SIGTERM (set before Run returns)
	cmd.Cancel = func() error {
		termAt = time.Now()
		return signalGroup(cmd.Process, sigTerm)
	}
	cmd.WaitDelay = h.grace // then exec kills the shell and stops waiting for its output
	started := time.Now()
	err := cmd.Run()
	took := time.Since(started)
	if !termAt.IsZero() {
		h.killGroup(cmd.Process, termAt)
	}
	result := metrics.HookOK
	switch cause := context.Cause(ctx); {
	case err == nil:
	case errors.Is(cause, errHookTimeout):
		result = metrics.HookTimeout
	case ctx.Err() != nil:
		result = metrics.HookCancelled
	default:
		result = metrics.HookError
	}
	if h.obs != nil {
		h.obs.HookRan(hook, result, took)
	}
	fields := []zap.Field{zap.String("hook", hook), zap.Uint64("seq", ev.Seq), zap.Stringer("role", ev.Role),
		zap.Int64("term", ev.Term), zap.String("leader", ev.LeaderID), zap.Duration("took", took), zap.String("result", result)}
	switch result {
	case metrics.HookOK:
		h.log.Info("hook ran", fields...)
	case metrics.HookCancelled:
		h.log.Warn("hook killed: "+context.Cause(ctx).Error()+" came first", append(fields, zap.Error(err))...)
	case metrics.HookTimeout:
		h.log.Error("hook killed: it ran past the hook timeout", append(fields, zap.Duration("timeout", h.timeout),
			zap.String("output", out.String()))...)
	default:
		h.log.Error("hook failed", append(fields, zap.Error(err), zap.String("output", out.String()))...)
	}
}

// killGroup SIGKILLs what is left of a hook's process group once the grace since its SIGTERM
// is over: the shell may have exited at once while a process it started still cleans up.
// It returns as soon as the group is gone.
func (h *hookRunner) killGroup(p *os.Process, termAt time.Time) {
	for deadline := termAt.Add(h.grace); time.Now().Before(deadline); {
		if !groupAlive(p) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling: a process group has no exit notification
	}
	signalGroup(p, sigKill)
}

// tailBuffer keeps the last max bytes written to it. exec calls Write from one goroutine at a
// time when Stdout and Stderr are the same writer.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }
