package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

// JSON logs carry "ts" as RFC 3339 in UTC with microseconds (2025-01-02T15:04:05.123456Z), the
// form log shippers and people read, instead of zap's default epoch-seconds float.
func TestJSONLogTimestampIsRFC3339UTC(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLoggerTo("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Microsecond)
	log.Info("probe")
	after := time.Now()
	var line struct {
		TS  any    `json:"ts"`
		Msg string `json:"msg"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Msg != "probe" {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	s, ok := line.TS.(string)
	if !ok || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`).MatchString(s) {
		t.Fatalf("ts = %#v, want RFC 3339 UTC with 6 fraction digits like \"2025-01-02T15:04:05.123456Z\"", line.TS)
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || ts.Before(before) || ts.After(after) {
		t.Fatalf("ts %s (%v) is not between %s and %s", s, err, before.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano))
	}
}
