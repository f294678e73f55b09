package calm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
	"github.com/dledger-go/dledger/server/adminclient"
)

// The scenarios of issue 35 (docs/protocol.md 14, adaptive failure detection): links that are
// slow, or whose round trip changes, and a leader that stops the world briefly. Links are
// delayed in user space by harness.DelayNet (this machine's kernel has no netem).
//
//	slow-links     every link delayed --delay +- --jitter one way, from the start (the
//	               leaderless share is what counts: leaderless_ms / duration_s)
//	noisy-leader   the leader's round trip to every member jumps from loopback to
//	               noisyRTT and back every noisyPeriod (a noisy neighbour)
//	slow-follower  the link between the leader and one follower turns slow
//	               (slowFollowerDelay +- slowFollowerJitter one way) and stays so
//	leader-stw     the leader stops for stwPause every stwPeriod (a stop-the-world pause)
//	leader-stall   the leader stops for twice its followers' adapted timeout: one leader
//	               change per stall, never two (not in "all": it is meant to move leadership)
const (
	noisyRTT           = 100 * time.Millisecond
	noisyPeriod        = 10 * time.Second
	slowFollowerDelay  = 50 * time.Millisecond
	slowFollowerJitter = 10 * time.Millisecond
	stwPause           = 50 * time.Millisecond
	stwPeriod          = time.Second
)

// delayed is a fault on a DelayNet, made before the members start.
type delayed struct {
	r    *calmRun
	name string
	dnet *harness.DelayNet
	run  func(ctx context.Context, end time.Time) error
}

func (f *delayed) Name() string { return f.name }

func (f *delayed) Available() error {
	d, err := harness.NewDelayNet(f.r.o.Members)
	if err != nil {
		return err
	}
	f.dnet = d
	f.r.releases = append(f.r.releases, d.Close)
	f.r.b.Cluster().UseDelayNet(d)
	f.r.res.method = "user-space delay proxies"
	if f.name == CalmSlowLinks {
		d.SetAll(f.r.o.Delay, f.r.o.Jitter)
		f.r.res.method = fmt.Sprintf("user-space delay proxies, %v +- %v one way", f.r.o.Delay, f.r.o.Jitter)
	}
	return nil
}

func (f *delayed) Inject(ctx context.Context, end time.Time) error { return f.run(ctx, end) }

// delayedFault returns scenario's fault.
func (r *calmRun) delayedFault(scenario string) *delayed {
	f := &delayed{r: r, name: scenario}
	switch scenario {
	case CalmSlowLinks:
		f.run = f.slowLinks
	case CalmNoisyLeader:
		f.run = f.noisyLeader
	default:
		f.run = f.slowFollower
	}
	return f
}

// slowLinks: the links are slow from the start; nothing more happens.
func (f *delayed) slowLinks(ctx context.Context, end time.Time) error {
	f.r.res.faults++
	f.r.progress(fmt.Sprintf("every link %v +- %v one way", f.r.o.Delay, f.r.o.Jitter))
	sleepCtx(ctx, time.Until(end))
	return nil
}

// leaderIndex is the agreed leader's slot.
func (f *delayed) leaderIndex() (int, error) {
	c := f.r.b.Cluster()
	l := c.Index(f.r.tr.current().ID)
	if l < 0 {
		return -1, fmt.Errorf("agreed leader %s is no member", f.r.tr.current())
	}
	return l, nil
}

// noisyLeader toggles the agreed leader's links between no delay and noisyRTT / 2 each way.
func (f *delayed) noisyLeader(ctx context.Context, end time.Time) error {
	c := f.r.b.Cluster()
	slow := false
	for time.Now().Before(end) && ctx.Err() == nil {
		sleepCtx(ctx, min(noisyPeriod, time.Until(end)))
		if ctx.Err() != nil || !time.Now().Before(end) {
			break
		}
		l, err := f.leaderIndex()
		if err != nil {
			return err
		}
		slow = !slow
		d := time.Duration(0)
		if slow {
			d = noisyRTT / 2
		}
		f.dnet.SetAll(0, 0)
		for j := range c.Members {
			if j != l {
				f.dnet.SetDelay(l, j, d, 0)
				f.dnet.SetDelay(j, l, d, 0)
			}
		}
		f.r.tr.markFaulted(c.Members[l].ID)
		f.r.res.faults++
		f.r.progress(fmt.Sprintf("round trip of leader %s now %v", c.Members[l].ID, 2*d))
	}
	f.dnet.SetAll(0, 0)
	return nil
}

// slowFollower slows the link between the agreed leader and one follower, for good.
func (f *delayed) slowFollower(ctx context.Context, end time.Time) error {
	c := f.r.b.Cluster()
	l, err := f.leaderIndex()
	if err != nil {
		return err
	}
	fo := f.r.follower(-1)
	f.dnet.SetDelay(l, fo, slowFollowerDelay, slowFollowerJitter)
	f.dnet.SetDelay(fo, l, slowFollowerDelay, slowFollowerJitter)
	f.r.res.faults++
	f.r.progress(fmt.Sprintf("link %s-%s %v +- %v one way", c.Members[l].ID, c.Members[fo].ID, slowFollowerDelay, slowFollowerJitter))
	sleepCtx(ctx, time.Until(end))
	return nil
}

// leaderSTW stops the agreed leader for stwPause every stwPeriod.
type leaderSTW struct{ r *calmRun }

func (f *leaderSTW) Name() string { return CalmLeaderSTW }

func (f *leaderSTW) Available() error {
	f.r.res.method = fmt.Sprintf("SIGSTOP %v every %v", stwPause, stwPeriod)
	return nil
}

func (f *leaderSTW) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	for time.Now().Before(end) && ctx.Err() == nil {
		l := c.Index(r.tr.current().ID)
		if l < 0 {
			return fmt.Errorf("agreed leader %s is no member", r.tr.current())
		}
		r.tr.markFaulted(c.Members[l].ID)
		if err := c.Pause(l); err != nil {
			return err
		}
		sleepCtx(ctx, stwPause)
		if err := c.Resume(l); err != nil {
			return err
		}
		r.res.faults++
		if r.res.faults%10 == 0 {
			r.progress(fmt.Sprintf("%d stops of %v", r.res.faults, stwPause))
		}
		sleepCtx(ctx, stwPeriod-stwPause)
	}
	return nil
}

// leaderStall stops the agreed leader for twice the follower timeout its followers report
// (followerTimeoutMs, the adapted window), then resumes it. Not a calm scenario: each stall
// should cost one leader change (the followers replace the silent leader), and never two (the
// resumed leader must not depose its successor). Not in "all"; the method column reports the
// most changes one stall caused.
type leaderStall struct {
	r           *calmRun
	maxPerFault int
}

func (f *leaderStall) Name() string { return CalmLeaderStall }

func (f *leaderStall) Available() error {
	f.r.res.method = "SIGSTOP for 2 x the followers' timeout"
	return nil
}

func (f *leaderStall) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	for time.Now().Before(end) && ctx.Err() == nil {
		l := c.Index(r.tr.current().ID)
		if l < 0 {
			return fmt.Errorf("agreed leader %s is no member", r.tr.current())
		}
		w := r.dw
		for _, i := range c.Others(l) {
			if st, err := memberStatus(ctx, c.Members[i].HTTPAddr); err == nil && st.FollowerTimeoutMs > 0 {
				w = time.Duration(st.FollowerTimeoutMs) * time.Millisecond
				break
			}
		}
		before := len(r.tr.result(time.Now()).leaderChanges)
		r.tr.markFaulted(c.Members[l].ID)
		if err := c.Pause(l); err != nil {
			return err
		}
		sleepCtx(ctx, 2*w)
		if err := c.Resume(l); err != nil {
			return err
		}
		r.awaitWhole(ctx)
		sleepCtx(ctx, 2*r.dw) // a second change would come within this
		n := len(r.tr.result(time.Now()).leaderChanges) - before
		f.maxPerFault = max(f.maxPerFault, n)
		r.res.faults++
		r.res.method = fmt.Sprintf("SIGSTOP for 2 x the followers' timeout; most leader changes per stall %d", f.maxPerFault)
		r.progress(fmt.Sprintf("%s stopped %v (2 x %v); %d leader change(s)", c.Members[l].ID, 2*w, w, n))
		sleepCtx(ctx, 3*time.Second) // the new leader's links adapt (8 heartbeats)
	}
	return nil
}

// memberStatus reads a member's GET /v1/status.
func memberStatus(ctx context.Context, addr string) (adminclient.StatusJSON, error) {
	var st adminclient.StatusJSON
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
