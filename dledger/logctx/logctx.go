// Package logctx gives a zap logger context fields, a member's group and id, the way
// zap's With does, but without encoding them into a copy of the encoder. zap's With clones
// the core's encoder with its own buffer (1 KiB from zap's pool) per call and per core: a
// host of 10,000 group members, each with a logger or three of its own, kept tens of MiB of
// buffers holding a few dozen bytes each (docs/design.md, "What a member costs"). Here the
// fields are kept as values and put in front of each entry's own fields when it is written,
// which is rare (role changes, not heartbeats): the same lines, byte for byte, for a cost
// paid per line written instead of per member.
package logctx

import (
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// With returns log with fields added to every entry it writes, before the entry's own, as
// log.With(fields...) does. Levels, sampling, names and callers are log's. A log that With
// gave exactly these fields last is returned as it is: a member's parts (its Server, its
// elector) each add the member's group and id to the logger they are given, and given the
// member's logger they share it instead of each keeping a copy (and writing the fields twice).
func With(log *zap.Logger, fields ...zap.Field) *zap.Logger {
	if c, ok := log.Core().(core); ok && sameFields(c.fields, fields) {
		return log
	}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return core{Core: c, fields: fields}
	}))
}

// sameFields: a and b are the same fields in the same order.
func sameFields(a, b []zap.Field) bool {
	return slices.EqualFunc(a, b, func(x, y zap.Field) bool { return x.Equals(y) })
}

// core adds fields to what the wrapped core writes. Enabled and Sync are the wrapped core's.
type core struct {
	zapcore.Core
	fields []zapcore.Field
}

// With keeps the new fields as values too (the wrapped core never encodes any).
func (c core) With(fs []zapcore.Field) zapcore.Core {
	return core{Core: c.Core, fields: append(slices.Clip(c.fields), fs...)}
}

// Check lets the wrapped core decide (its level, its sampler, which of a tee's cores write)
// and, if anything writes, routes the write through the fields.
func (c core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	inner := c.Core.Check(e, nil)
	if inner == nil {
		return ce
	}
	return ce.AddCore(e, writer{inner: inner, fields: c.fields})
}

// Write is only reached by a caller that skipped Check.
func (c core) Write(e zapcore.Entry, fs []zapcore.Field) error {
	return c.Core.Write(e, append(slices.Clip(c.fields), fs...))
}

// writer writes one checked entry: the cores the wrapped core chose, with the entry as the
// logger completed it after Check (caller, stack).
type writer struct {
	inner  *zapcore.CheckedEntry
	fields []zapcore.Field
}

func (w writer) Enabled(zapcore.Level) bool                                       { return true }
func (w writer) With([]zapcore.Field) zapcore.Core                                { return w }
func (w writer) Sync() error                                                      { return nil }
func (w writer) Check(zapcore.Entry, *zapcore.CheckedEntry) *zapcore.CheckedEntry { return nil }

// Write writes the entry to the chosen cores once. A write error is not reported: the
// logger's ErrorOutput, where zap reports one, is not known here.
func (w writer) Write(e zapcore.Entry, fs []zapcore.Field) error {
	w.inner.Entry = e
	w.inner.Write(append(slices.Clip(w.fields), fs...)...)
	return nil
}

// Carries says whether log adds exactly fields to every entry already (With would return log as
// it is): a caller that writes an entry's fields itself then leaves them out.
func Carries(log *zap.Logger, fields ...zap.Field) bool {
	c, ok := log.Core().(core)
	return ok && sameFields(c.fields, fields)
}
