package sim

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// Mixed is the profile or scenario name that alternates between the choices per seed (see
// CampaignOptions.OptionsFor).
const Mixed = "mixed"

// CampaignOptions describe a run of many seeds.
type CampaignOptions struct {
	Seeds     int
	SeedStart uint64
	Members   int    // 3..7, or 0 for mixed: 3 for even seeds, 5 for odd ones
	Profile   string // a profile name, or "mixed": lan for seed/2 even, dledger for seed/2 odd
	Scenario  string // chaos, rejoin, or "mixed": rejoin when seed/4 is a multiple of 4, else chaos
	Duration  time.Duration
	// RPCTimeout, Broken: as in Options.
	RPCTimeout time.Duration
	Broken     Broken
	// Hosts > 0 runs hosts of Groups groups each (Options.Hosts): members are then at most
	// Hosts (mixed: 3, or 5 for odd seeds when there are 5 hosts or more), the scenario chaos.
	Hosts, Groups int
	// Reconfig: as Options.Reconfig.
	Reconfig bool
	// Workers run seeds in parallel (0: GOMAXPROCS). Each seed is still one deterministic
	// goroutine; results are reported in seed order whatever the worker count.
	Workers int
	// Trace receives the full trace of every seed; the seeds then run one by one on the
	// caller's goroutine (OnResult may write to the same writer).
	Trace io.Writer
	// OnResult, if set, sees every result, in seed order, on the caller's goroutine.
	OnResult func(Result)
}

// OptionsFor is the run a campaign makes for seed. The mixed choices depend on the seed only,
// so a failing seed names concrete values that replay it alone.
func (c CampaignOptions) OptionsFor(seed uint64) Options {
	o := Options{Seed: seed, Members: c.Members, Profile: c.Profile, Scenario: Scenario(c.Scenario),
		Duration: c.Duration, RPCTimeout: c.RPCTimeout, Broken: c.Broken, Trace: c.Trace, Reconfig: c.Reconfig}
	if o.Members == 0 {
		o.Members = []int{3, 5}[seed%2]
	}
	if c.Hosts > 0 {
		o.Hosts, o.Groups = c.Hosts, c.Groups
		if c.Members == 0 {
			o.Members = min(o.Members, c.Hosts)
		}
		if c.Scenario == Mixed {
			c.Scenario, o.Scenario = string(ScenarioChaos), ScenarioChaos
		}
	}
	if o.Profile == Mixed {
		o.Profile = []string{dledger.ProfileLAN, dledger.ProfileDLedger}[(seed/2)%2]
	}
	if c.Scenario == Mixed {
		o.Scenario = ScenarioChaos
		if (seed/4)%4 == 0 {
			o.Scenario = ScenarioRejoin
		}
	}
	return o
}

// Summary totals a campaign.
type Summary struct {
	Seeds, Violations, Elections int
	// MaxTerm is the most terms one run moved up (Result.TermsUsed): the absolute term means
	// little when some runs start near the ceiling.
	MaxTerm int64
	// Runs that started near or at the term ceiling, runs that reached it, sidecar runs, and
	// runs whose members started at staggered times.
	NearCeiling, AtCeiling, CeilingReached, Sidecar, Staggered int
	SimTime, Wall                                              time.Duration
	Steps                                                      int
	// MaxRecovery is the heal-to-stable-leader time closest to its L1 bound, over all seeds,
	// and MaxRecoveryBound that bound (profiles have different bounds).
	MaxRecovery, MaxRecoveryBound time.Duration
	Failed                        []Result // the runs with a violation, in seed order
}

// Line is the one-line summary the CLI ends with.
func (s Summary) Line() string {
	rate := 0.0
	if s.Wall > 0 {
		rate = float64(s.Seeds) / s.Wall.Seconds()
	}
	return fmt.Sprintf("sim: seeds=%d violations=%d elections=%d max_term=%d sim_seconds=%.0f wall_seconds=%.1f seeds_per_sec=%.1f steps=%d max_recovery_ms=%d recovery_bound_ms=%d near_ceiling=%d at_ceiling=%d ceiling_reached=%d sidecar=%d staggered=%d",
		s.Seeds, s.Violations, s.Elections, s.MaxTerm, s.SimTime.Seconds(), s.Wall.Seconds(), rate, s.Steps,
		s.MaxRecovery.Milliseconds(), s.MaxRecoveryBound.Milliseconds(), s.NearCeiling, s.AtCeiling, s.CeilingReached, s.Sidecar, s.Staggered)
}

// Campaign runs seeds SeedStart .. SeedStart+Seeds-1. It stops early only for invalid options.
func Campaign(c CampaignOptions) (Summary, error) {
	if c.Seeds < 1 {
		return Summary{}, fmt.Errorf("seeds must be >= 1 (got %d)", c.Seeds)
	}
	if c.Profile == "" {
		c.Profile = dledger.ProfileLAN
	}
	if c.Scenario == "" {
		c.Scenario = string(ScenarioChaos)
	}
	// Validate every distinct combination up front, so a bad option is one error, not N.
	for i := range uint64(16) {
		if _, _, err := c.OptionsFor(c.SeedStart + i).withDefaults(); err != nil {
			return Summary{}, err
		}
	}
	workers := c.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	if c.Trace != nil {
		return c.runTraced(start)
	}
	return c.runParallel(start, min(workers, c.Seeds))
}

// runParallel runs the seeds on workers goroutines and reports them in seed order on the
// caller's goroutine.
func (c CampaignOptions) runParallel(start time.Time, workers int) (Summary, error) {
	results := make([]*Result, c.Seeds)
	ready := make(chan int, workers)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	next := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := firstErr != nil
				mu.Unlock()
				if i >= c.Seeds || stop {
					return
				}
				r, err := Run(c.OptionsFor(c.SeedStart + uint64(i)))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[i] = &r
				mu.Unlock()
				ready <- i
			}
		}()
	}
	go func() { wg.Wait(); close(ready) }()

	var sum Summary
	emitted := 0
	for range ready {
		// Report in seed order: emit every finished result that has no gap before it.
		for {
			mu.Lock()
			var r *Result
			if emitted < c.Seeds {
				r = results[emitted]
				results[emitted] = nil
			}
			mu.Unlock()
			if r == nil {
				break
			}
			emitted++
			sum.add(*r)
			if c.OnResult != nil {
				c.OnResult(*r)
			}
		}
	}
	if firstErr != nil {
		return sum, firstErr
	}
	sum.Wall = time.Since(start)
	return sum, nil
}

// runTraced runs the seeds one by one on the caller's goroutine: the trace is written while a
// seed runs and OnResult after it, so both may write to the same (unsynchronised) writer.
func (c CampaignOptions) runTraced(start time.Time) (Summary, error) {
	var sum Summary
	for i := 0; i < c.Seeds; i++ {
		r, err := Run(c.OptionsFor(c.SeedStart + uint64(i)))
		if err != nil {
			return sum, err
		}
		sum.add(r)
		if c.OnResult != nil {
			c.OnResult(r)
		}
	}
	sum.Wall = time.Since(start)
	return sum, nil
}

func (s *Summary) add(r Result) {
	s.Seeds++
	s.Elections += r.Elections
	s.MaxTerm = max(s.MaxTerm, r.TermsUsed)
	switch r.Extreme {
	case ExtremeNearCeiling:
		s.NearCeiling++
	case ExtremeAtCeiling:
		s.AtCeiling++
	}
	if r.CeilingReached {
		s.CeilingReached++
	}
	if r.Sidecar {
		s.Sidecar++
	}
	if r.Staggered {
		s.Staggered++
	}
	s.SimTime += r.SimTime
	s.Steps += r.Steps
	if s.MaxRecoveryBound == 0 || float64(r.MaxRecovery)/float64(r.Bound) > float64(s.MaxRecovery)/float64(s.MaxRecoveryBound) {
		s.MaxRecovery, s.MaxRecoveryBound = r.MaxRecovery, r.Bound
	}
	if r.Violation != nil {
		s.Violations++
		s.Failed = append(s.Failed, r)
	}
}
