package dledger

import (
	"maps"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger/logctx"
)

// line writes msg at lvl with the member's fields, group and self (unless its logger adds them
// already), term and role, then extra: the line e.logAt(lvl) writes with e.fields(extra...),
// byte for byte and with the same caller, for the lines every election writes. logAt builds a
// logger for each line (a clone, its core and closure, the fields joined twice: some seven
// allocations, made even for a line the sampler then drops), and a mass election writes two or
// three lines per group (issue 29, halloc); here the logger is asked first (Check: its level
// and sampler) and a line written costs one slice of fields. Call it from the line's own
// place: the caller reported is the caller of line.
func (e *Elector) line(lvl zapcore.Level, msg string, extra ...zap.Field) {
	ce := skipLine(e.log).Check(lvl, msg)
	if ce == nil {
		return
	}
	group, self := zap.String("group", e.ms.Group()), zap.String("self", e.ms.SelfID())
	fs := make([]zap.Field, 0, 4+len(extra))
	if !logctx.Carries(e.log, group, self) {
		fs = append(fs, group, self)
	}
	fs = append(fs, zap.Int64("term", e.ms.CurrTerm()), zap.Stringer("role", e.ms.Role()))
	ce.Write(append(fs, extra...)...)
}

// lineLoggers holds, for each logger the electors of the process were given, that logger with
// one more frame of caller skipped (line's own), made once. Read without a lock (a map
// replaced, never changed, under mu): every election line of a host's thousands of members
// asks it. Bounded: past lineLoggersMax loggers (tests make one per member) a line makes its
// own.
var lineLoggers struct {
	mu sync.Mutex
	m  atomic.Pointer[map[*zap.Logger]*zap.Logger]
}

const lineLoggersMax = 64

func skipLine(log *zap.Logger) *zap.Logger {
	if m := lineLoggers.m.Load(); m != nil {
		if l := (*m)[log]; l != nil {
			return l
		}
	}
	l := log.WithOptions(zap.AddCallerSkip(1))
	lineLoggers.mu.Lock()
	defer lineLoggers.mu.Unlock()
	old := lineLoggers.m.Load()
	if old != nil && (*old)[log] != nil {
		return (*old)[log]
	}
	if old == nil || len(*old) < lineLoggersMax {
		m := make(map[*zap.Logger]*zap.Logger, 1+lenOf(old))
		if old != nil {
			maps.Copy(m, *old)
		}
		m[log] = l
		lineLoggers.m.Store(&m)
	}
	return l
}

func lenOf(m *map[*zap.Logger]*zap.Logger) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
