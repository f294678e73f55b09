package dledger

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger/logctx"
)

// lineTestLogger is a production-like logger (JSON, caller) writing to buf.
func lineTestLogger(buf *bytes.Buffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zap.InfoLevel), zap.AddCaller())
}

// lastLine decodes the last JSON line of buf.
func lastLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	ls := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(ls[len(ls)-1]), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLineIsLogAtsLine: e.line writes what e.logAt(lvl) wrote with e.fields, field for field
// in the same order, the caller being line's caller; with a logger that adds group and self
// already, they are not written twice.
func TestLineIsLogAtsLine(t *testing.T) {
	var buf bytes.Buffer
	base := lineTestLogger(&buf)
	for _, log := range []*zap.Logger{base, logctx.With(base, zap.String("group", "g"), zap.String("self", "n0"))} {
		u := newUnit(t, 3, nil)
		u.e.log = log
		u.e.logAt(zap.InfoLevel).Info(EventBecomesCandidate, u.e.fields(zap.Int64("seenTerm", 7), zap.String("why", "w"))...)
		old := buf.String()
		oldLine := lastLine(t, &buf)
		_, file, line, _ := runtime.Caller(0)
		u.e.line(zap.InfoLevel, EventBecomesCandidate, zap.Int64("seenTerm", 7), zap.String("why", "w"))
		newLine := lastLine(t, &buf)
		if want := "dledger/logline_alloc_test.go:" + strconv.Itoa(line+1); newLine["caller"] != want || !strings.HasSuffix(file, "logline_alloc_test.go") {
			t.Errorf("caller %v, want %s", newLine["caller"], want)
		}
		for _, k := range []string{"ts", "caller"} {
			delete(oldLine, k)
			delete(newLine, k)
		}
		o, _ := json.Marshal(oldLine)
		n, _ := json.Marshal(newLine)
		if !bytes.Equal(o, n) {
			t.Errorf("line %s, logAt's %s", n, o)
		}
		// The keys in the same order, once each.
		keys := func(s string) string {
			var out []string
			for _, k := range []string{`"msg"`, `"group"`, `"self"`, `"term"`, `"role"`, `"seenTerm"`, `"why"`} {
				out = append(out, strconv.Itoa(strings.Count(s, k))+"@"+strconv.Itoa(strings.Index(s, k)-strings.Index(s, `"msg"`)))
			}
			return strings.Join(out, " ")
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if a, b := keys(lines[len(lines)-2]), keys(lines[len(lines)-1]); a != b {
			t.Errorf("keys (count@offset) %s, logAt's %s\n%s", b, a, buf.String()[len(old):])
		}
	}
}

// TestLineCostsLessThanLogAt: a line the logger leaves out allocates nothing, and a line
// written allocates less than logAt's, which built a logger per line (issue 29, halloc): the
// fields' slice and zap's own two (the caller's stack and path), against about ten.
func TestLineCostsLessThanLogAt(t *testing.T) {
	if raceEnabled {
		t.Skip("zap's pooled entries and buffers are dropped at random under the race detector")
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel), zap.AddCaller())
	lineLoggers.mu.Lock()
	lineLoggers.m.Store(nil) // other tests' loggers may have filled it
	lineLoggers.mu.Unlock()
	u := newUnit(t, 3, nil)
	u.e.log = log
	if a := testing.AllocsPerRun(100, func() { u.e.line(zap.DebugLevel, "x") }); a != 0 {
		t.Errorf("a debug line on an info logger made %v allocations", a)
	}
	viaLogAt := testing.AllocsPerRun(100, func() { u.e.logAt(zap.InfoLevel).Info(EventBecomesLeader, u.e.fields()...) })
	viaLine := testing.AllocsPerRun(100, func() { u.e.line(zap.InfoLevel, EventBecomesLeader) })
	if viaLine > 3 || viaLine+5 > viaLogAt { // zap's own two (caller, its trimmed path) and the fields
		t.Errorf("a line made %v allocations, logAt's %v", viaLine, viaLogAt)
	}
	t.Logf("allocations per line: %v (logAt: %v)", viaLine, viaLogAt)
}
