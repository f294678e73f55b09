package harness

import (
	"context"
	"io"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// roundCounts sums the members' election counters: vote rounds by ParseResult
// (dledger_elections_total) and the answers candidates received by VoteResult
// (dledger_vote_responses_total). ok is false if a member could not be scraped.
type roundCounts struct {
	ok      bool
	results map[string]float64
	answers map[string]float64
}

const (
	metricRounds  = "dledger_elections_total"
	metricAnswers = "dledger_vote_responses_total"
	resultLabel   = "result" // both counters' label for the ParseResult or VoteResult
)

// scrapeRounds reads /metrics of members idxs.
func (b *bench) scrapeRounds(idxs []int) roundCounts {
	rc := roundCounts{ok: true, results: map[string]float64{}, answers: map[string]float64{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, i := range idxs {
		if err := b.scrapeMember(ctx, b.c.Members[i].HTTPAddr, rc); err != nil {
			rc.ok = false
		}
	}
	return rc
}

func (b *bench) scrapeMember(ctx context.Context, addr string, rc roundCounts) error {
	resp, err := b.poller.get(ctx, addr, "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return addCounters(io.LimitReader(resp.Body, 4<<20), rc)
}

// addCounters parses a Prometheus text exposition and adds the samples of the two election
// counters, summed over their other labels (group, self_id), to rc by their result label.
func addCounters(r io.Reader, rc roundCounts) error {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return err
	}
	for name, into := range map[string]map[string]float64{metricRounds: rc.results, metricAnswers: rc.answers} {
		f := families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == resultLabel {
					into[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return nil
}

// minus is the change since before.
func (rc roundCounts) minus(before roundCounts) roundCounts {
	out := roundCounts{ok: rc.ok && before.ok, results: map[string]float64{}, answers: map[string]float64{}}
	for k, v := range rc.results {
		out.results[k] = v - before.results[k]
	}
	for k, v := range rc.answers {
		out.answers[k] = v - before.answers[k]
	}
	return out
}

// total is the number of vote rounds.
func (rc roundCounts) total() float64 {
	var n float64
	for _, v := range rc.results {
		n += v
	}
	return n
}
