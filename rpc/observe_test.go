package rpc

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestObserverSamplerBuiltByFirstLine: an observer builds its sampled logger (zap's sampler,
// 448 KiB of counters) only when it first logs at an enabled level, and then still samples:
// logBurst lines of one message per second, whatever the counters and hooks see. A host's rpc
// server and links mostly never log, so their samplers were most of a host's fixed heap.
func TestObserverSamplerBuiltByFirstLine(t *testing.T) {
	core, lines := zapobserver.New(zapcore.InfoLevel)
	o := newObserver(zap.New(core), Hooks{})
	o.logAt(zap.DebugLevel).Debug("rpc: connected")       // disabled: builds nothing
	o.rpcError(protocol.RequestVote, ReasonTimeout, "n1") // routine: not logged
	if o.sampled.Load() != nil {
		t.Fatal("a sampler was built before any line at an enabled level")
	}
	for i := range 3 * logBurst {
		o.badFrame(ReasonMalformed, fmt.Sprintf("127.0.0.1:%d", 1000+i), nil)
	}
	if o.sampled.Load() == nil {
		t.Fatal("no sampler after lines at an enabled level")
	}
	// The sampler's second starts at its first line: 15 lines take far less, unless the
	// machine stalls the test for a second, which lets at most one more burst through.
	if got := lines.FilterMessage("rpc: bad frame, closing connection").Len(); got < logBurst || got >= 3*logBurst {
		t.Fatalf("%d bad-frame lines logged of %d, want the sampler's burst %d (%d after a stall)", got, 3*logBurst, logBurst, 2*logBurst)
	}
	if got := o.badFrames.Load(); got != 3*logBurst {
		t.Fatalf("%d bad frames counted, want %d (every one, sampled or not)", got, 3*logBurst)
	}
	if n := lines.FilterMessage("rpc: bad frame, closing connection").Len(); lines.Len() != n {
		t.Fatalf("%d lines, want only the %d bad-frame ones: %v", lines.Len(), n, lines.All())
	}
}
