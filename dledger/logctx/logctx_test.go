package logctx

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type fixedClock struct{}

func (fixedClock) Now() time.Time                         { return time.Unix(1700000000, 0) }
func (fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// build returns a logger like the production one (JSON, callers, a sampler) teed with a
// console core at warn, both into buffers.
func build() (*zap.Logger, *bytes.Buffer, *bytes.Buffer) {
	var js, con bytes.Buffer
	jsonCore := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&js), zap.DebugLevel)
	sampled := zapcore.NewSamplerWithOptions(jsonCore, time.Second, 3, 100)
	conCore := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&con), zap.WarnLevel)
	return zap.New(zapcore.NewTee(sampled, conCore), zap.AddCaller(), zap.WithClock(fixedClock{})), &js, &con
}

// lines logs the same entries through log.
func lines(log *zap.Logger) {
	for i := range 6 { // the sampler keeps 3 of equal messages a second
		log.Info("becomes leader", zap.Int("i", i))
	}
	log.Debug("debug line")
	log.Named("rpc").Warn("warned", zap.String("peer", "n1"))
	log.With(zap.Int64("term", 7)).Error("chained", zap.Bool("x", true))
	if ce := log.Check(zap.InfoLevel, "checked"); ce != nil {
		ce.Write(zap.String("k", "v"))
	}
	log.Check(zap.InfoLevel, "checked but not written") // never written: nothing may appear
}

// TestSameLinesAsZapWith: With writes what zap's With writes, byte for byte (callers
// included, so the two loggers log from one line: lines), through a sampler and a tee whose
// cores differ in level. Fails if the fields go after the entry's own, if a core the tee
// would skip at that level writes, or if sampling is bypassed.
func TestSameLinesAsZapWith(t *testing.T) {
	fields := []zap.Field{zap.String("group", "g1"), zap.String("self", "n0")}
	zl, zjs, zcon := build()
	lines(zl.With(fields...))
	ol, ojs, ocon := build()
	lines(With(ol, fields...))
	if zjs.String() != ojs.String() {
		t.Errorf("JSON lines differ:\nzap With:\n%s\nlogctx.With:\n%s", zjs, ojs)
	}
	if zcon.String() != ocon.String() {
		t.Errorf("console lines differ:\nzap With:\n%s\nlogctx.With:\n%s", zcon, ocon)
	}
	if n := bytes.Count(ojs.Bytes(), []byte("becomes leader")); n != 3 {
		t.Errorf("%d sampled lines, want 3:\n%s", n, ojs)
	}
	if !bytes.Contains(ojs.Bytes(), []byte(`"group":"g1","self":"n0","term":7,"x":true`)) {
		t.Errorf("chained With's fields not in order:\n%s", ojs)
	}
}

// TestWithEncodesNothing: what With keeps per logger is its fields, not an encoder with a
// buffer: at most 512 bytes per logger, where zap's With takes more than a KiB (measured
// alongside, so the bound is seen to separate the two).
func TestWithEncodesNothing(t *testing.T) {
	log, _, _ := build()
	fields := []zap.Field{zap.String("group", "g1"), zap.String("self", "n0")}
	perLogger := func(with func() *zap.Logger) uint64 {
		keep := make([]*zap.Logger, 1000)
		var before, after runtimeMem
		before.read()
		for i := range keep {
			keep[i] = with()
		}
		after.read()
		return (after.bytes - before.bytes) / uint64(len(keep))
	}
	ours := perLogger(func() *zap.Logger { return With(log, fields...) })
	zaps := perLogger(func() *zap.Logger { return log.With(fields...) })
	t.Logf("bytes per logger: logctx.With %d, zap's With %d", ours, zaps)
	if ours > 512 || zaps <= 1024 {
		t.Errorf("bytes per logger: logctx.With %d (want at most 512), zap's With %d (more than 1024 expected)", ours, zaps)
	}
}

type runtimeMem struct{ bytes uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.bytes = s.TotalAlloc
}

// TestWithTwiceSharesTheLogger: a member's parts each add the member's fields to the logger
// they are given (a Server, then its elector given the Server's logger). The second With of
// the same fields returns that logger, and the lines carry the fields once, as one With
// writes them; other fields, or the same keys with other values, still make a new logger.
// Fails if each part keeps a logger of its own again, or if a field is written twice.
func TestWithTwiceSharesTheLogger(t *testing.T) {
	fields := []zap.Field{zap.String("group", "g1"), zap.String("self", "n0")}
	once, ojs, _ := build()
	lines(With(once, fields...))
	twice, tjs, _ := build()
	member := With(twice, fields...)
	elector := With(member, zap.String("group", "g1"), zap.String("self", "n0"))
	if elector != member {
		t.Error("a second With of the same fields made a new logger")
	}
	lines(elector)
	if ojs.String() != tjs.String() {
		t.Errorf("lines differ:\none With:\n%s\ntwo:\n%s", ojs, tjs)
	}
	for _, other := range [][]zap.Field{{zap.String("group", "g2"), zap.String("self", "n0")}, {zap.String("group", "g1")},
		{zap.String("group", "g1"), zap.String("self", "n0"), zap.Int("k", 1)}} {
		if With(member, other...) == member {
			t.Errorf("With(%v) returned the logger with %v", other, fields)
		}
	}
}
