package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger"
)

// A host of many groups logs one "becomes leader" per group within a second of a cold start:
// every one reaches the log (the benchmark and operators count them by group), while any other
// message repeated as often is still sampled.
func TestJSONLogKeepsEveryElectorEvent(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLoggerTo("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500 // well past the sampler's 100 equal lines a second
	for i := 0; i < n; i++ {
		g := log.With(zap.Int("group", i))
		g.Info(dledger.EventBecomesLeader)
		g.Info(dledger.EventBecomesCandidate)
		g.Info(dledger.EventMemberStarted)
		g.Info("some other line")
	}
	out := buf.String()
	for _, msg := range []string{dledger.EventBecomesLeader, dledger.EventBecomesCandidate, dledger.EventMemberStarted} {
		if got := strings.Count(out, `"msg":"`+msg+`"`); got != n {
			t.Errorf("%q logged %d times, want %d", msg, got, n)
		}
	}
	if got := strings.Count(out, `"msg":"some other line"`); got >= n {
		t.Errorf("another message logged %d times of %d: not sampled any more", got, n)
	}
}
