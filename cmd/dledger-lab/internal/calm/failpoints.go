package calm

import (
	"context"
	"fmt"
	"time"

	"github.com/dledger-go/dledger/cmd/internal/harness"
)

// The calm scenarios' faults, one harness.Failpoint each. Available checks what the fault needs
// from the machine and prepares it before the members start (flap-link's network namespaces,
// cpu-starved's cgroup); calmRun.release undoes that after the members are gone. Inject runs the
// fault's schedule until the scenario's end.

// failpoint returns the scenario's fault, bound to the run.
func (r *calmRun) failpoint(scenario string) harness.Failpoint {
	switch scenario {
	case CalmFlapFollower:
		return &flapFollower{r}
	case CalmFlapLink:
		return &flapLink{r: r}
	case CalmLeaderResets:
		return &leaderResets{r}
	case CalmRestartLoop:
		return &restartLoop{r}
	case CalmSlowLinks, CalmNoisyLeader, CalmSlowFollower:
		return r.delayedFault(scenario)
	case CalmLeaderSTW:
		return &leaderSTW{r}
	case CalmLeaderStall:
		return &leaderStall{r: r}
	}
	return &cpuStarved{r: r}
}

// flapFollower stops a follower with SIGSTOP for 0.2 to 3 detection windows and resumes it.
type flapFollower struct{ r *calmRun }

func (f *flapFollower) Name() string { return CalmFlapFollower }

func (f *flapFollower) Available() error {
	f.r.res.method = "SIGSTOP"
	return nil
}

func (f *flapFollower) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	return r.eachFollower(ctx, end, 1, 2, func(i int) (string, error) {
		d := r.scaled(flapFactors[r.res.faults%len(flapFactors)])
		if err := c.Pause(i); err != nil {
			return "", err
		}
		r.tr.forget(i, time.Now())
		sleepCtx(ctx, d)
		if err := c.Resume(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s stopped %.0f ms", c.Members[i].ID, harness.Ms(d)), nil
	})
}

// flapLink cuts a follower off from the other members in network namespaces and heals it.
type flapLink struct {
	r    *calmRun
	mnet *memberNet
}

func (f *flapLink) Name() string { return CalmFlapLink }

func (f *flapLink) Available() error {
	mnet, err := newMemberNet(f.r.o.Members)
	if err != nil {
		return err
	}
	f.mnet = mnet
	f.r.releases = append(f.r.releases, mnet.close)
	mnet.place(f.r.b.Cluster())
	f.r.res.method = "netns blackhole rules"
	return nil
}

func (f *flapLink) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	return r.eachFollower(ctx, end, 1, 2, func(i int) (string, error) {
		d := r.scaled(flapFactors[r.res.faults%len(flapFactors)])
		id := c.Members[i].ID
		c.Note("cut %s", id)
		t0 := time.Now()
		if err := f.mnet.cut(i); err != nil {
			f.mnet.heal(i)
			return "", err
		}
		c.Note("cut %s: rules in place after %.0f ms", id, harness.Ms(time.Since(t0)))
		sleepCtx(ctx, d-time.Since(t0))
		c.Note("heal %s", id)
		t0 = time.Now()
		if err := f.mnet.heal(i); err != nil {
			return "", err
		}
		c.Note("heal %s: rules gone after %.0f ms", id, harness.Ms(time.Since(t0)))
		return fmt.Sprintf("%s cut off %.0f ms", id, harness.Ms(d)), nil
	})
}

// leaderResets resets every TCP connection of the live leader with ss -K.
type leaderResets struct{ r *calmRun }

func (f *leaderResets) Name() string { return CalmLeaderResets }

func (f *leaderResets) Available() error {
	if err := checkConnReset(); err != nil {
		return err
	}
	f.r.res.method = "ss -K"
	return nil
}

func (f *leaderResets) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	for time.Now().Before(end) && ctx.Err() == nil {
		l := c.Index(r.tr.current().ID)
		if l < 0 {
			return fmt.Errorf("agreed leader %s is no member", r.tr.current())
		}
		r.tr.markFaulted(c.Members[l].ID)
		n, err := r.resetLeader(l)
		if err != nil {
			return err
		}
		r.res.faults++
		r.progress(fmt.Sprintf("%d sockets of %s reset", n, c.Members[l].ID))
		sleepCtx(ctx, r.between(0.5, 1.5))
	}
	return nil
}

// restartLoop kills a follower (kill -9 and SIGTERM alternately) and restarts it.
type restartLoop struct{ r *calmRun }

func (f *restartLoop) Name() string { return CalmRestartLoop }

func (f *restartLoop) Available() error {
	f.r.res.method = "kill -9 and SIGTERM"
	return nil
}

func (f *restartLoop) Inject(ctx context.Context, end time.Time) error {
	r := f.r
	c := r.b.Cluster()
	return r.eachFollower(ctx, end, 0.5, 1.5, func(i int) (string, error) {
		down := r.scaled(restartFactors[r.res.faults%len(restartFactors)])
		how := "kill -9"
		var err error
		if r.res.faults%2 == 0 {
			err = c.Kill(i)
		} else {
			how = "SIGTERM"
			err = c.Terminate(i, 10*time.Second)
		}
		if err != nil {
			return "", err
		}
		r.tr.forget(i, time.Now())
		sleepCtx(ctx, down)
		if err := c.Start(i); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s, restarted after %.0f ms", how, c.Members[i].ID, harness.Ms(down)), nil
	})
}

// cpuStarved limits a follower to a sliver of one CPU: a cgroup quota where this machine
// allows one, else a SIGSTOP duty cycle.
type cpuStarved struct {
	r  *calmRun
	cg *cpuCgroup
}

func (f *cpuStarved) Name() string { return CalmCPUStarved }

func (f *cpuStarved) Available() error {
	r, o := f.r, f.r.o
	r.res.method = "SIGSTOP duty cycle " + dutyStop.String() + "/" + dutyPeriod.String()
	if o.CPUMethod == CPUMethodSIGSTOP {
		return nil
	}
	quota := time.Duration(float64(o.CPUPeriod) * o.CPUQuota)
	g, err := newCPUCgroup(quota, o.CPUPeriod)
	switch {
	case err == nil:
		f.cg = g
		r.releases = append(r.releases, g.remove)
		r.res.method = fmt.Sprintf("cgroup quota %v/%v", quota, o.CPUPeriod)
		fmt.Fprintf(r.out, "calm: %s: %s, quota %v every %v\n", CalmCPUStarved, g, quota, o.CPUPeriod)
	case o.CPUMethod == CPUMethodCgroup:
		return fmt.Errorf("--cpu-method cgroup: %w", err)
	default:
		fmt.Fprintf(r.out, "calm: %s: no cgroup (%v); falling back to a SIGSTOP duty cycle, %v stopped of every %v\n",
			CalmCPUStarved, err, dutyStop, dutyPeriod)
	}
	return nil
}

func (f *cpuStarved) Inject(ctx context.Context, end time.Time) error {
	return f.r.starve(ctx, end, f.cg)
}

// eachFollower is the schedule of the faults that hit one follower at a time: until end, pick
// the follower (the same one while it still follows), fault it (fault returns what it did),
// count and print it, wait for the group to be whole again, then pause lo to hi detection
// windows.
func (r *calmRun) eachFollower(ctx context.Context, end time.Time, lo, hi float64, fault func(i int) (string, error)) error {
	for f := -1; time.Now().Before(end) && ctx.Err() == nil; {
		f = r.follower(f)
		what, err := fault(f)
		if err != nil {
			return err
		}
		r.res.faults++
		r.progress(what)
		r.awaitWhole(ctx)
		sleepCtx(ctx, r.between(lo, hi))
	}
	return nil
}
