package harness

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// trialResult is one trial as measured.
type trialResult struct {
	old           Leader        // the failed leader (zero for a cold start)
	key           Leader        // the leader a quorum first agreed on
	elapsed       time.Duration // fault (or first process start) to that agreement
	leaders       []Leader      // every new leader seen, in order; after the first: needless
	rounds        roundCounts   // vote rounds of the live members during the trial
	phases        phases        // where the time went, from the members' logs
	rejoinChanges int           // leader changes while the failed member rejoined
	failed        string        // why the trial failed; empty if it converged
}

// needless is the number of leader changes after the first new leader.
func (r trialResult) needless() int { return max(len(r.leaders)-1, 0) }

func (r trialResult) termDelta() int64 { return r.key.Term - r.old.Term }

func (r trialResult) progressLine(i int, o Options) string {
	head := fmt.Sprintf("trial %d/%d:", i, o.Trials)
	if r.failed != "" {
		return head + " FAILED: " + r.failed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %8.1f ms  %s -> %s (term +%d)  phases=%s  rounds=%s  needless=%d", head, Ms(r.elapsed),
		r.old, r.key, r.termDelta(), r.phases, r.rounds.describe(), r.needless())
	if r.needless() > 0 {
		fmt.Fprintf(&b, " %v", r.leaders)
	}
	if o.Scenario != ScenarioColdStart {
		fmt.Fprintf(&b, "  rejoin_changes=%d", r.rejoinChanges)
	}
	return b.String()
}

// describe prints the round count and its results, e.g. `3 (WAIT_TO_VOTE_NEXT 1, ...)`.
func (rc roundCounts) describe() string {
	if !rc.ok {
		return "?"
	}
	var parts []string
	for _, p := range protocol.AllParseResults() {
		if n := rc.results[p.String()]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s %g", p, n))
		}
	}
	return fmt.Sprintf("%g (%s)", rc.total(), strings.Join(parts, ", "))
}

// benchStats accumulates the trials of a run.
type benchStats struct {
	trials   int
	failed   int
	elapsed  []time.Duration // converged trials only
	needless int
	rejoin   int
	termSum  int64
	rounds   roundCounts     // summed over trials whose counters could be read
	roundN   int             // trials in rounds
	phaseSum phases          // summed over trials whose phases could be read
	detects  []time.Duration // each such trial's detect phase, for its percentiles
	// idleChanges counts leader changes in a stable, idle group between trials.
	idleChanges int
}

func (s *benchStats) add(r trialResult) {
	s.trials++
	s.rejoin += r.rejoinChanges
	if r.failed != "" {
		s.failed++
		return
	}
	s.elapsed = append(s.elapsed, r.elapsed)
	s.needless += r.needless()
	s.termSum += r.termDelta()
	if r.phases.ok {
		s.phaseSum.detect += r.phases.detect
		s.phaseSum.elect += r.phases.elect
		s.phaseSum.spread += r.phases.spread
		s.detects = append(s.detects, r.phases.detect)
	}
	if r.rounds.ok {
		if s.rounds.results == nil {
			s.rounds = roundCounts{ok: true, results: map[string]float64{}, answers: map[string]float64{}}
		}
		for k, v := range r.rounds.results {
			s.rounds.results[k] += v
		}
		for k, v := range r.rounds.answers {
			s.rounds.answers[k] += v
		}
		s.roundN++
	}
}

// Percentile is the nearest-rank percentile (p in (0,100]) of the values, in any order, in
// ms; NaN if there are none. With fewer than 100 values p99 is the maximum. Every benchmark
// reports its percentiles by this one rule.
func Percentile(values []time.Duration, p float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	sorted := slices.Sorted(slices.Values(values))
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return Ms(sorted[min(max(rank, 1), len(sorted))-1])
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summaryLine is the last line of a run; scripts parse it, so fields are only ever added at
// the end.
func (s *benchStats) summaryLine(o Options) string {
	sorted := slices.Sorted(slices.Values(s.elapsed))
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	mean, meanTerm, meanRounds := math.NaN(), math.NaN(), math.NaN()
	if n := len(sorted); n > 0 {
		mean, meanTerm = Ms(sum)/float64(n), float64(s.termSum)/float64(n)
	}
	if s.roundN > 0 {
		meanRounds = s.rounds.total() / float64(s.roundN)
	}
	detects := slices.Sorted(slices.Values(s.detects))
	phase := func(d time.Duration) float64 {
		if len(s.detects) == 0 {
			return math.NaN()
		}
		return Ms(d) / float64(len(s.detects))
	}
	return fmt.Sprintf("bench: scenario=%s members=%d profile=%s trials=%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f detect_ms=%d"+
		" min_ms=%.1f mean_ms=%.1f failed=%d needless_changes=%d mean_term_delta=%.2f mean_rounds=%.2f rejoin_changes=%d"+
		" mean_detect_phase_ms=%.1f mean_elect_phase_ms=%.1f mean_spread_phase_ms=%.1f idle_changes=%d"+
		" p50_detect_phase_ms=%.1f p99_detect_phase_ms=%.1f",
		o.Scenario, o.Members, o.Profile, s.trials,
		Percentile(sorted, 50), Percentile(sorted, 90), Percentile(sorted, 99), Percentile(sorted, 100),
		o.cfg.DetectionWindow().Milliseconds(),
		Percentile(sorted, 0), mean, s.failed, s.needless, meanTerm, meanRounds, s.rejoin,
		phase(s.phaseSum.detect), phase(s.phaseSum.elect), phase(s.phaseSum.spread), s.idleChanges,
		Percentile(detects, 50), Percentile(detects, 99))
}

// breakdownLine lists the vote rounds by result and the answers candidates got, summed over
// the trials: the first place to look when a failover takes longer than the timings allow.
func (s *benchStats) breakdownLine() string {
	if s.roundN == 0 {
		return "bench: vote rounds: no counters read"
	}
	var res, ans []string
	for _, p := range protocol.AllParseResults() {
		res = append(res, fmt.Sprintf("%s=%g", p, s.rounds.results[p.String()]))
	}
	for _, v := range protocol.AllVoteResults() {
		if n := s.rounds.answers[v.String()]; n != 0 {
			ans = append(ans, fmt.Sprintf("%s=%g", v, n))
		}
	}
	return fmt.Sprintf("bench: vote rounds over %d trials: %s; answers received: %s",
		s.roundN, strings.Join(res, " "), strings.Join(ans, " "))
}
