package main

import (
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger"
)

// The production logger samples (zap's default: per message text, 100 equal lines a second,
// then 1 in 100). Sampling is keyed by the message alone, so on a host of many groups the
// elector's events of different groups count as one message: a cold start of 1,000 groups
// would log about a tenth of its "becomes leader" lines, and whatever reads them (dledger
// bench groups, the failover benchmark's phases, an operator's grep for one group) would find
// most groups never elected. The events of dledger/events.go are the log's interface; they
// bypass the sampler, everything else keeps it.

// unsampledEvents are the messages that are never sampled away.
var unsampledEvents = map[string]bool{
	dledger.EventBecomesCandidate: true,
	dledger.EventBecomesLeader:    true,
	dledger.EventMemberStarted:    true,
}

// keepEvents routes the unsampled events to raw and every other entry to sampled (a sampler
// wrapping raw).
func keepEvents(raw, sampled zapcore.Core) zapcore.Core {
	return eventsCore{raw: raw, sampled: sampled}
}

type eventsCore struct{ raw, sampled zapcore.Core }

func (c eventsCore) Enabled(l zapcore.Level) bool { return c.raw.Enabled(l) }

func (c eventsCore) With(fs []zapcore.Field) zapcore.Core {
	return eventsCore{raw: c.raw.With(fs), sampled: c.sampled.With(fs)}
}

func (c eventsCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if unsampledEvents[e.Message] {
		return c.raw.Check(e, ce)
	}
	return c.sampled.Check(e, ce)
}

// Write is only reached by a caller that skipped Check; it is not sampled then either.
func (c eventsCore) Write(e zapcore.Entry, fs []zapcore.Field) error { return c.raw.Write(e, fs) }

func (c eventsCore) Sync() error { return c.raw.Sync() }
