package rpc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// Errors a call can end with (passed to a done callback). Match them with errors.Is.
var (
	ErrTimeout  = errors.New("rpc: call timed out")
	ErrPeerDown = errors.New("rpc: no connection to the peer")
	// ErrConnLost ends a call whose request was written (or queued for writing) on a connection
	// that then dropped: unlike a call refused with ErrPeerDown at once, the peer may have acted
	// on it. It matches ErrPeerDown too.
	ErrConnLost    = fmt.Errorf("%w: the connection dropped with the call in flight", ErrPeerDown)
	ErrUnknownPeer = errors.New("rpc: unknown peer id")
	ErrClosed      = errors.New("rpc: client closed")
	ErrOverloaded  = errors.New("rpc: send queue to the peer is full")
	ErrBadResponse = errors.New("rpc: peer sent a malformed response")
	ErrTooLarge    = errors.New("rpc: message exceeds the maximum frame size")
	ErrOutOfRange  = errors.New("rpc: message holds a term or ledger value out of bounds")
)

// Reasons passed to Hooks.OnBadFrame. A fixed, small set, so they can be metric labels.
const (
	ReasonOversize       = "oversize"        // length header of 0 or above MaxFrameSize
	ReasonMalformed      = "malformed"       // not valid msgpack, a length that lies, a wrong type
	ReasonTooDeep        = "too_deep"        // nesting beyond what any message needs
	ReasonUnknownCode    = "unknown_code"    // a request code we do not serve
	ReasonUnexpectedKind = "unexpected_kind" // a request sent to a client, a response to a server, or a mismatched code
	ReasonTruncated      = "truncated"       // the peer closed in the middle of a frame
	ReasonStalled        = "stalled"         // a frame stayed unfinished too long (server; the connection is closed)
	ReasonFlood          = "flood"           // the peer kept sending while it was throttled
	ReasonUnknownID      = "unknown_id"      // a response to a request id never sent (client)
	ReasonOutOfRange     = "out_of_range"    // a term outside [0, MaxTerm] or a ledger value outside [-1, MaxLedgerValue]
)

// Reasons passed to Hooks.OnRPCError: why a call failed (client) or a request went
// unanswered (server).
const (
	ReasonTimeout     = "timeout"
	ReasonPeerDown    = "peer_down"
	ReasonUnknownPeer = "unknown_peer"
	ReasonClosed      = "closed"
	ReasonOverloaded  = "overloaded"
	ReasonBadResponse = "bad_response"
	ReasonTooLarge    = "too_large"
	// ReasonOutOfRange (declared above) also names a call refused before sending: its
	// message held a term or ledger value the peer would refuse (ErrOutOfRange).
	ReasonNilResponse = "nil_response" // a Handler returned nil; nothing is sent back
	ReasonWrite       = "write_failed" // the reply could not be queued on the connection
)

// BadFrameReasons lists every reason Hooks.OnBadFrame reports, so metrics can declare their
// series up front.
func BadFrameReasons() []string {
	return []string{ReasonOversize, ReasonMalformed, ReasonTooDeep, ReasonUnknownCode,
		ReasonUnexpectedKind, ReasonTruncated, ReasonStalled, ReasonFlood, ReasonUnknownID,
		ReasonOutOfRange}
}

// RPCErrorReasons lists every reason Hooks.OnRPCError reports.
func RPCErrorReasons() []string {
	return []string{ReasonTimeout, ReasonPeerDown, ReasonUnknownPeer, ReasonClosed,
		ReasonOverloaded, ReasonBadResponse, ReasonTooLarge, ReasonOutOfRange, ReasonNilResponse,
		ReasonWrite}
}

// Hooks let the embedder count what the rpc layer sees (the metrics package turns them into
// Prometheus counters). They run synchronously on network goroutines, so they must be fast,
// must not block, and must be safe for concurrent use. Nil hooks are skipped.
type Hooks struct {
	// OnBadFrame is called once per rejected frame; the connection that sent it is closed.
	OnBadFrame func(reason string)
	// OnRPCError is called once per failed call or unanswered request; code is the request
	// code's name (VOTE, HEART_BEAT, ...).
	OnRPCError func(code, reason string)
	// OnAuthFailure is called once per connection closed because peer authentication failed
	// (AuthFailureReasons lists the reasons), on the server and on the client side.
	OnAuthFailure func(reason string)
	// OnRoundTrip is called by a client once per call that got a well-formed answer (whatever
	// its response code), with the request code's name, the peer's member id and the time from
	// the call's submission to its answer's arrival: the local send queue, the network both
	// ways and the peer's handler (a vote includes the voter's fsync). Failed calls, late
	// answers to calls that timed out, and a connection's first METADATA frame are not reported.
	OnRoundTrip func(code, peer string, d time.Duration)
}

// Stats are running totals since construction.
type Stats struct {
	Requests  uint64 // server: requests handed to the Handler; client: calls sent on a connection
	BadFrames uint64 // frames rejected; each closed its connection
	RPCErrors uint64 // server: requests not answered; client: calls that ended with an error
	// AuthFailures counts connections closed because peer authentication failed.
	AuthFailures uint64
}

// badFrameReason maps a decoding error to its Reason constant.
func badFrameReason(err error) string {
	switch {
	case errors.Is(err, errFrameSize):
		return ReasonOversize
	case errors.Is(err, errTooDeep):
		return ReasonTooDeep
	case errors.Is(err, errUnknownCode):
		return ReasonUnknownCode
	case errors.Is(err, errUnexpectedKind):
		return ReasonUnexpectedKind
	case errors.Is(err, errOutOfRange):
		return ReasonOutOfRange
	}
	return ReasonMalformed
}

// encodeErr maps an encodeFrame error to the error a call fails with.
func encodeErr(err error) error {
	if errors.Is(err, errOutOfRange) {
		return ErrOutOfRange
	}
	return ErrTooLarge
}

// callErrReason maps a call error to its Reason constant.
func callErrReason(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return ReasonTimeout
	case errors.Is(err, ErrPeerDown):
		return ReasonPeerDown
	case errors.Is(err, ErrUnknownPeer):
		return ReasonUnknownPeer
	case errors.Is(err, ErrClosed):
		return ReasonClosed
	case errors.Is(err, ErrOverloaded):
		return ReasonOverloaded
	case errors.Is(err, ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrOutOfRange):
		return ReasonOutOfRange
	}
	return ReasonBadResponse
}

// observer counts, reports to the hooks and logs. Its logger is sampled: a peer sending
// garbage in a loop must not be able to flood the log (at most logBurst lines per message
// text per second; the counters and hooks still see every event).
//
// The sampled logger is built by the first line logged at an enabled level (logAt): zap's
// sampler keeps its counters in 448 KiB, and a host has an rpc server and four clients whose
// observers mostly never log (2.2 MiB of a settled host's live heap, some 220 bytes a member
// at 10,000 groups; issue 29). A sampler counts from its first line alike whenever it is
// built, so the lines logged are the same.
type observer struct {
	hooks     Hooks
	base      *zap.Logger                // unsampled: only its level is read (logAt)
	sampled   atomic.Pointer[zap.Logger] // nil until the first line at an enabled level
	requests  atomic.Uint64
	badFrames atomic.Uint64
	rpcErrors atomic.Uint64
	authFails atomic.Uint64
}

const logBurst = 5

func newObserver(log *zap.Logger, hooks Hooks) *observer {
	if log == nil {
		log = zap.NewNop()
	}
	o := &observer{hooks: hooks, base: log}
	if log.Core().Enabled(zap.DebugLevel) {
		// A debug logger logs every connection (a diagnosis, not a host of thousands of
		// groups): its sampler is built now, not by the first connect's line, whose 448 KiB
		// would delay that connection's reader (TestSilentConnectionRedialled).
		o.logAt(zap.DebugLevel)
	}
	return o
}

// logAt is the observer's sampled logger for a line at lvl: base itself when lvl is disabled
// (the line is dropped there as the sampler would drop it, and no sampler is built for it).
func (o *observer) logAt(lvl zapcore.Level) *zap.Logger {
	if !o.base.Core().Enabled(lvl) {
		return o.base
	}
	if l := o.sampled.Load(); l != nil {
		return l
	}
	l := o.base.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, logBurst, 0)
	}))
	if o.sampled.CompareAndSwap(nil, l) {
		return l
	}
	return o.sampled.Load() // another goroutine's, so that every line counts in one sampler
}

func (o *observer) badFrame(reason, remote string, err error) {
	o.badFrames.Add(1)
	if o.hooks.OnBadFrame != nil {
		o.hooks.OnBadFrame(reason)
	}
	o.logAt(zap.WarnLevel).Warn("rpc: bad frame, closing connection",
		zap.String("reason", reason), zap.String("remote", remote), zap.Error(err))
}

// authFailure counts and logs (sampled) a connection refused or closed by authentication.
// peer is the member id the peer claimed, when it got that far.
func (o *observer) authFailure(reason, remote, peer string, err error) {
	o.authFails.Add(1)
	if o.hooks.OnAuthFailure != nil {
		o.hooks.OnAuthFailure(reason)
	}
	o.logAt(zap.WarnLevel).Warn("rpc: peer authentication failed, closing connection", zap.String("reason", reason),
		zap.String("remote", remote), zap.String("claimedId", peer), zap.Error(err))
}

func (o *observer) rpcError(code protocol.RequestCode, reason, peer string) {
	o.rpcErrors.Add(1)
	if o.hooks.OnRPCError != nil {
		o.hooks.OnRPCError(code.String(), reason)
	}
	// Timeouts and a down peer are routine while a member is away; they are counted, and
	// the elector logs what matters to it, so only the unusual reasons are logged here.
	if reason != ReasonTimeout && reason != ReasonPeerDown && reason != ReasonClosed {
		o.logAt(zap.WarnLevel).Warn("rpc: call failed", zap.Stringer("code", code),
			zap.String("reason", reason), zap.String("peer", peer))
	}
}

// roundTrip reports an answered call submitted at sent (zero: not submitted by a caller, such as
// the connection's hello, so not reported).
func (o *observer) roundTrip(code protocol.RequestCode, peer string, sent time.Time) {
	if o.hooks.OnRoundTrip == nil || sent.IsZero() {
		return
	}
	o.hooks.OnRoundTrip(code.String(), peer, time.Since(sent))
}

func (o *observer) stats() Stats {
	return Stats{
		Requests:     o.requests.Load(),
		BadFrames:    o.badFrames.Load(),
		RPCErrors:    o.rpcErrors.Load(),
		AuthFailures: o.authFails.Load(),
	}
}

// gnetLogger adapts zap to gnet's logging.Logger, so gnet logs through the embedder's logger
// (it writes to stdout otherwise). Once the server is stopping, gnet's warnings and errors
// are the shutdown's own (Stop shuts the listening socket down first, and gnet reports the
// failed accept), so they are logged at debug level.
type gnetLogger struct {
	s        *zap.SugaredLogger
	stopping *atomic.Bool
}

func (l gnetLogger) Debugf(format string, args ...any) { l.s.Debugf(format, args...) }
func (l gnetLogger) Infof(format string, args ...any)  { l.s.Infof(format, args...) }
func (l gnetLogger) Warnf(format string, args ...any)  { l.problem(l.s.Warnf, format, args...) }
func (l gnetLogger) Errorf(format string, args ...any) { l.problem(l.s.Errorf, format, args...) }

// Fatalf logs at error level: a library must not exit the process that embeds it; the
// failure reaches us as an error from gnet.Run.
func (l gnetLogger) Fatalf(format string, args ...any) { l.problem(l.s.Errorf, format, args...) }

func (l gnetLogger) problem(logf func(string, ...any), format string, args ...any) {
	if l.stopping.Load() {
		logf = l.s.Debugf
	}
	logf(format, args...)
}
