package compare

import (
	"github.com/dledger-go/dledger/cmd/internal/harness"

	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// row is one system at one setting: its trials, idle cost and anything that went wrong.
type row struct {
	set, system, setting string
	skipped              string // why the system did not run (not installed, failed to start)
	stopped              string // why its trials ended early (it could not be made steady again)

	elapsed []time.Duration // converged trials
	failed  int             // trials without an agreed leader within the bound
	// idleChanges: the leader moved while the group was idle before a kill (trial redone);
	// rejoinChanges: the killed member's return moved leadership away from the new leader.
	idleChanges, rejoinChanges int
	pollSum                    time.Duration // round trips of the measuring polls
	pollN                      int

	idleCPU []float64 // per member, fraction of one core over the idle window
	rss     []int64   // per member, bytes, at the end of the idle window
}

// ratio is a/b, NaN when either is missing or b is zero: "x times ours".
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func (r *row) meanMs() float64 {
	var xs []float64
	for _, d := range r.elapsed {
		xs = append(xs, harness.Ms(d))
	}
	return mean(xs)
}

func (r *row) pollMs() float64 {
	if r.pollN == 0 {
		return math.NaN()
	}
	return harness.Ms(r.pollSum) / float64(r.pollN)
}

func (r *row) idlePercent() float64 { return 100 * mean(r.idleCPU) }

func (r *row) rssMiB() float64 {
	var xs []float64
	for _, b := range r.rss {
		xs = append(xs, float64(b)/(1<<20))
	}
	return mean(xs)
}

// base is the row every ratio of a set is taken against: ours at our default profile.
const base = "ours"

func baseOf(rows []*row, set string) *row {
	for _, r := range rows {
		if r.set == set && r.system == base {
			return r
		}
	}
	return nil
}

// ratios is the row's p50, p90 and p99 each divided by ours's in the same set.
func ratios(rows []*row, r *row) [3]float64 {
	out := [3]float64{math.NaN(), math.NaN(), math.NaN()}
	b := baseOf(rows, r.set)
	if b == nil {
		return out
	}
	for i, p := range []float64{50, 90, 99} {
		out[i] = ratio(harness.Percentile(r.elapsed, p), harness.Percentile(b.elapsed, p))
	}
	return out
}

func num(x float64, format string) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf(format, x)
}

// writeTable prints the markdown table of the report, one line per row.
func writeTable(w io.Writer, rows []*row) {
	fmt.Fprintln(w, "| set | system | setting | trials | p50 ms | p90 ms | p99 ms | max ms | p50 / ours | p90 / ours | p99 / ours | idle CPU per member, % of a core | RSS per member, MiB | failed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(w, "| %s | %s | %s | - | - | - | - | - | - | - | - | - | - | skipped: %s |\n", r.set, r.system, r.setting, r.skipped)
			continue
		}
		q := ratios(rows, r)
		failed := fmt.Sprint(r.failed)
		if r.stopped != "" {
			failed += "; " + r.stopped
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.set, r.system, r.setting, len(r.elapsed)+r.failed,
			num(harness.Percentile(r.elapsed, 50), "%.1f"), num(harness.Percentile(r.elapsed, 90), "%.1f"),
			num(harness.Percentile(r.elapsed, 99), "%.1f"), num(harness.Percentile(r.elapsed, 100), "%.1f"),
			num(q[0], "%.2fx"), num(q[1], "%.2fx"), num(q[2], "%.2fx"),
			num(r.idlePercent(), "%.2f"), num(r.rssMiB(), "%.1f"), failed)
	}
}

// summaryLine is one machine-readable line per row; fields are only ever added at the end.
func summaryLine(rows []*row, r *row) string {
	if r.skipped != "" {
		return fmt.Sprintf("compare: set=%s system=%s skipped=%q", r.set, r.system, r.skipped)
	}
	q := ratios(rows, r)
	var cpu, rss []string
	for i := range r.idleCPU {
		cpu = append(cpu, fmt.Sprintf("%.2f", 100*r.idleCPU[i]))
		rss = append(rss, fmt.Sprintf("%.1f", float64(r.rss[i])/(1<<20)))
	}
	return fmt.Sprintf("compare: set=%s system=%s trials=%d failed=%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f mean_ms=%.1f"+
		" ratio_p50=%.2f ratio_p90=%.2f ratio_p99=%.2f idle_cpu_pct=%.2f idle_cpu_pct_members=%s rss_mib=%.1f rss_mib_members=%s"+
		" poll_ms=%.2f idle_changes=%d rejoin_changes=%d stopped=%q",
		r.set, r.system, len(r.elapsed)+r.failed, r.failed,
		harness.Percentile(r.elapsed, 50), harness.Percentile(r.elapsed, 90), harness.Percentile(r.elapsed, 99), harness.Percentile(r.elapsed, 100), r.meanMs(),
		q[0], q[1], q[2], r.idlePercent(), strings.Join(cpu, ","), r.rssMiB(), strings.Join(rss, ","),
		r.pollMs(), r.idleChanges, r.rejoinChanges, r.stopped)
}
