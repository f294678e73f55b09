package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/dledger-go/dledger/server/adminclient"
)

// poller fetches /v1/status. The client keeps one connection per member alive, so a poll is
// one request on an open socket (tens of microseconds on loopback), not a TCP handshake; the
// short timeout keeps a slow member from delaying the next poll for long.
type poller struct {
	period time.Duration
	client *http.Client
}

func NewPoller(period time.Duration) *poller {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &poller{period: period, client: &http.Client{Transport: tr, Timeout: 250 * time.Millisecond}}
}

// get is GET path on the member at addr (the /metrics scrape); an answer other than 200 is
// an error.
func (p *poller) get(ctx context.Context, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return resp, nil
}

func (p *poller) status(ctx context.Context, addr string) (adminclient.StatusJSON, error) {
	return (&adminclient.Client{Addr: addr, HTTP: p.client}).Status(ctx)
}

// Observation is one member's answer, stamped when it arrived: the member's state was taken
// at most one round trip earlier, so a convergence time is late by at most one poll period
// plus one round trip.
type Observation struct {
	Idx int
	At  time.Time
	St  adminclient.StatusJSON
	Err error
}

var errDeadline = errors.New("deadline passed")

// Watch polls members idxs (each from its own goroutine, every period) and hands every answer
// to fn on the caller's goroutine until fn returns true (nil), the deadline passes
// (errDeadline), ctx ends, or a member exits on its own.
func (b *Harness) Watch(ctx context.Context, idxs []int, period time.Duration, deadline time.Time, fn func(Observation) bool) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	obs := make(chan Observation)
	for _, i := range idxs {
		go b.pollMember(ctx, i, period, obs)
	}
	check := time.NewTicker(20 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case o := <-obs:
			if fn(o) {
				return nil
			}
		case <-check.C:
			if err := b.c.unexpectedExit(); err != nil {
				return err
			}
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded && !time.Now().Before(deadline) {
				return errDeadline
			}
			return ctx.Err()
		}
	}
}

// pollMember polls one member until ctx ends. A paused member is skipped: it cannot answer,
// and a request to it would only hold a connection until the timeout.
func (b *Harness) pollMember(ctx context.Context, i int, period time.Duration, out chan<- Observation) {
	addr := b.c.Members[i].HTTPAddr
	for {
		start := time.Now()
		if !b.c.isPaused(i) {
			st, err := b.poller.status(ctx, addr)
			select {
			case out <- Observation{Idx: i, At: time.Now(), St: st, Err: err}:
			case <-ctx.Done():
				return
			}
		}
		wait := time.NewTimer(period - time.Since(start))
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return
		}
	}
}

// tracker follows the members' reports during one trial: the latest status of each, every
// distinct new leader in the order first seen, when a quorum first agreed, and any sign of
// two leaders in one term (a safety violation, docs/protocol.md S1).
type tracker struct {
	quorum     int
	old        Leader // the failed leader (zero for a cold start): not a new leader
	latest     map[int]adminclient.StatusJSON
	seen       []Leader
	termLeader map[int64]string
	violation  string

	converged   Leader
	convergedAt time.Time
}

func newTracker(groupSize int, old Leader) *tracker {
	return &tracker{quorum: Quorum(groupSize), old: old, latest: map[int]adminclient.StatusJSON{},
		termLeader: map[int64]string{}}
}

// observe takes one answer and reports whether a quorum now agrees on a new leader (the
// first time only).
func (t *tracker) observe(o Observation) bool {
	if o.Err != nil {
		delete(t.latest, o.Idx) // not answering: it counts for nobody
		return false
	}
	t.latest[o.Idx] = o.St
	k := Leader{o.St.LeaderID, o.St.Term}
	if k.ID == "" {
		return false
	}
	if prev, ok := t.termLeader[k.Term]; ok && prev != k.ID && t.violation == "" {
		t.violation = fmt.Sprintf("two leaders in term %d: %s and %s (member %s reports %s)",
			k.Term, prev, k.ID, o.St.SelfID, k.ID)
	}
	t.termLeader[k.Term] = k.ID
	if k == t.old || (t.old.ID != "" && k.Term < t.old.Term) {
		return false
	}
	if !t.hasSeen(k) {
		t.seen = append(t.seen, k)
	}
	if t.convergedAt.IsZero() && Agree(t.latest, ViewOf, k) >= t.quorum {
		t.converged, t.convergedAt = k, o.At
		return true
	}
	return false
}

func (t *tracker) hasSeen(k Leader) bool {
	for _, s := range t.seen {
		if s == k {
			return true
		}
	}
	return false
}

// describe is the members' last reports, for a failed trial's message.
func (t *tracker) describe() string { return describeAll(t.latest) }

func describeAll(latest map[int]adminclient.StatusJSON) string {
	idxs := make([]int, 0, len(latest))
	for i := range latest {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	var parts []string
	for _, i := range idxs {
		st := latest[i]
		parts = append(parts, fmt.Sprintf("%s %s term %d leader %q last %s", st.SelfID, st.Role, st.Term, st.LeaderID, st.LastParseResult))
	}
	if len(parts) == 0 {
		return "no member answered"
	}
	return strings.Join(parts, "; ")
}

// measure watches the live members from t0 until a quorum agrees on a leader other than old,
// then for the settle window, counting leaders that appear after the first; then it reads
// the members' logs written since logOffsets to split the time into phases. A trial that does
// not converge within the timeout is returned as failed; the error is for what stops the run
// (interruption, a member exiting on its own).
func (b *bench) measure(ctx context.Context, live []int, old Leader, t0 time.Time, logOffsets []int64) (trialResult, error) {
	t := newTracker(b.c.Size(), old)
	r := trialResult{old: old}
	err := b.Watch(ctx, live, b.opts.Poll, t0.Add(b.opts.Timeout), t.observe)
	if errors.Is(err, errDeadline) {
		r.failed = fmt.Sprintf("no quorum agreed on a new leader within %v (%s)", b.opts.Timeout, t.describe())
		b.c.Note("trial failed: %s", r.failed)
		return r, nil
	}
	if err != nil {
		return r, err
	}
	r.key, r.elapsed = t.converged, t.convergedAt.Sub(t0)
	b.c.Note("quorum agrees on %s after %.1f ms", r.key, Ms(r.elapsed))
	err = b.Watch(ctx, live, b.opts.Poll, time.Now().Add(b.opts.Settle), func(o Observation) bool {
		t.observe(o)
		return false
	})
	if !errors.Is(err, errDeadline) {
		return r, err
	}
	r.leaders = t.seen
	r.phases = b.readPhases(live, logOffsets, t0, r, t.convergedAt)
	if t.violation != "" {
		r.failed = "SAFETY: " + t.violation
	}
	return r, nil
}

// StablePoll is the polling period while waiting for stability: nothing is being timed.
const StablePoll = 10 * time.Millisecond

// AwaitStable waits until every member answers and agrees (one LEADER, every other member its
// FOLLOWER in the same term) without a break for one heartbeat interval, so the next fault
// hits a group in its steady state. It also counts the leaders other than want that appear
// meanwhile in want's term or later: after a rejoin there should be none (docs/protocol.md L2).
func (b *Harness) AwaitStable(ctx context.Context, want Leader) (Leader, int, error) {
	latest := map[int]adminclient.StatusJSON{}
	var changes []Leader
	var since time.Time
	var agreed Leader
	hold := b.opts.cfg.HeartBeatInterval
	bound := b.opts.GenerousBound()
	err := b.Watch(ctx, b.c.Others(-1), StablePoll, time.Now().Add(bound), func(o Observation) bool {
		if o.Err != nil {
			delete(latest, o.Idx)
			since = time.Time{}
			return false
		}
		latest[o.Idx] = o.St
		if k := (Leader{o.St.LeaderID, o.St.Term}); want.ID != "" && k.ID != "" && k != want &&
			k.Term >= want.Term && !containsKey(changes, k) {
			changes = append(changes, k)
		}
		k, _, ok := Unanimous(latest, b.c.Size(), ViewOf)
		switch {
		case !ok:
			since = time.Time{}
		case since.IsZero() || k != agreed:
			since, agreed = o.At, k
		}
		return ok && o.At.Sub(since) >= hold
	})
	if errors.Is(err, errDeadline) {
		return Leader{}, len(changes), fmt.Errorf("group not stable within %v (%s)", bound, describeAll(latest))
	}
	return agreed, len(changes), err
}

func containsKey(ks []Leader, k Leader) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
