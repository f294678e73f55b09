package harness

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dledger-go/dledger/dledger"
)

// The benchmark's fast reading of a log line must say what encoding/json says, or leave the
// line to it: lines written by a zap logger configured as the members' (RFC 3339 times), with
// the values that could trip a hand-written reader.
func TestScanGroupLogLineAgreesWithJSON(t *testing.T) {
	var buf bytes.Buffer
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&buf), zapcore.DebugLevel))
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g8"), zap.String("self", "n1"), zap.Int64("term", 7), zap.String("role", "LEADER"))
	log.Info(dledger.EventBecomesCandidate, zap.String("group", "g9"), zap.String("self", "n2"), zap.Int64("term", 0))
	log.Info(dledger.EventMemberStarted, zap.String("self", "n0"), zap.Int64("term", 12), zap.String("group", "g10")) // another order
	log.Info(dledger.EventBecomesLeader, zap.String("group", `g"q`), zap.String("self", "n1"), zap.Int64("term", 3))  // an escape
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g1"), zap.String("self", "n1"), zap.Int64("term", 3), zap.String("group", "g2"))
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g1"), zap.String("self", "n1"), zap.Float64("term", 3.5))
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g1"), zap.String("self", "n1"))                        // no term
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g1"), zap.String("self", "n1"), zap.Int64("term", -4)) // a negative term
	log.Info(dledger.EventBecomesLeader, zap.String("group", "g1"), zap.Any("peer", map[string]string{"self": "n9"}), zap.String("self", "n1"), zap.Int64("term", 2))
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	lines = append(lines,
		[]byte(`{"level":"info","ts":1764300000.5,"msg":"becomes leader","group":"g1","self":"n1","term":4}`), // an older build's time
		[]byte(`{"level":"info","ts":"not a time","msg":"becomes leader","group":"g1","self":"n1","term":4}`),
		[]byte(`{"level":"info","ts":"2026-11-28T06:31:49.611083Z","msg":"becomes leader","group":"g1","self":"n1","term":4`), // cut
	)
	fast := 0
	for i, line := range lines {
		got, ok := scanGroupLogLine(line)
		if !ok {
			continue
		}
		fast++
		var want groupLogLine
		if err := json.Unmarshal(line, &want); err != nil {
			t.Errorf("line %d: read %+v, but encoding/json refuses it (%v): %s", i, got, err, line)
			continue
		}
		if !time.Time(got.TS).Equal(time.Time(want.TS)) || got.Msg != want.Msg || got.Group != want.Group || got.Self != want.Self || got.Term != want.Term {
			t.Errorf("line %d: read %+v, encoding/json %+v: %s", i, got, want, line)
		}
	}
	if fast < 4 { // the first three lines, and the negative term
		t.Fatalf("only %d of %d lines read without encoding/json: the fast path is not taken", fast, len(lines))
	}
	// Every line still gives parseGroupEvent's answer: the fast path or encoding/json.
	for i, line := range lines[:3] {
		if _, ok := parseGroupEvent(0, line); !ok {
			t.Errorf("line %d not an event: %s", i, line)
		}
	}
	if ev, ok := parseGroupEvent(0, lines[3]); !ok || ev.Group != `g"q` {
		t.Errorf("the escaped group: %+v %v", ev, ok)
	}
}

// A LeaderWatch fed the events as they arrive, in any slices, finds what FirstLeaders finds
// over all of them.
func TestLeaderWatchAgreesWithFirstLeaders(t *testing.T) {
	t0, at, lead := leaderEvents()
	evs := []GroupEvent{
		lead(1, -5, "a", 8), lead(0, 10, "a", 8), lead(1, 20, "a", 7), lead(2, 40, "a", 8),
		lead(1, 30, "b", 6), lead(2, 25, "b", 6),
		{Host: 1, At: at(5), Msg: dledger.EventBecomesCandidate, Group: "c", Term: 9},
		lead(1, 50, "other", 99), lead(2, 60, "z", 0), lead(1, 55, "z", 1),
	}
	want := map[string]int64{"a": 7, "b": 5, "c": 8, "z": -1}
	all := FirstLeaders(evs, t0, want, 0)
	if len(all) != 3 {
		t.Fatalf("FirstLeaders = %+v", all)
	}
	for cut1 := 0; cut1 <= len(evs); cut1++ {
		for cut2 := cut1; cut2 <= len(evs); cut2++ {
			w := NewLeaderWatch(t0, want, 0)
			w.Add(evs[:cut1])
			w.Add(evs[:cut2])
			w.Add(evs[:cut2]) // nothing new
			w.Add(evs)
			if len(w.Led) != len(all) {
				t.Fatalf("cuts %d,%d: %+v, want %+v", cut1, cut2, w.Led, all)
			}
			for g, e := range all {
				if got := w.Led[g]; got != e {
					t.Fatalf("cuts %d,%d: group %s %+v, want %+v", cut1, cut2, g, got, e)
				}
			}
		}
	}
}
