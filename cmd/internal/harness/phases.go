package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// phases splits one measured failover by what the members' own logs say (info level; the
// messages are dledger's Event* constants):
//
//	detect  fault -> the first member gives up on the leader (EventBecomesCandidate);
//	        for a cold start: first process start -> a quorum of members is up (the quorum-th
//	        EventMemberStarted), the earliest a leader can be elected, however fast the protocol
//	elect   -> the winner becomes leader (EventBecomesLeader, with its self and term)
//	spread  -> a quorum reports it to the benchmark (its first heartbeat, plus polling)
//
// It is how a number that is longer than the timings allow gets explained: is the time in
// failure detection, in vote rounds, or in telling the others?
type phases struct {
	ok                    bool
	detect, elect, spread time.Duration
}

func (p phases) String() string {
	if !p.ok {
		return "?"
	}
	return fmt.Sprintf("%.0f+%.0f+%.0f", Ms(p.detect), Ms(p.elect), Ms(p.spread))
}

// LogLine is the part of a member's zap JSON line the phases need.
type LogLine struct {
	TS   logTime `json:"ts"`
	Msg  string  `json:"msg"`
	Self string  `json:"self"`
	Term int64   `json:"term"`
}

func (l LogLine) time() time.Time { return time.Time(l.TS) }

// logTime is a log line's "ts": RFC 3339 text, as members write it ("2025-01-02T15:04:05.123456Z"),
// or Unix seconds as a number, as members before that did (and zap does by default), so logs
// of older builds still split into phases.
type logTime time.Time

func (t *logTime) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		*t = logTime(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("ts %v is not a time", f)
	}
	sec, frac := math.Modf(f)
	*t = logTime(time.Unix(int64(sec), int64(frac*1e9)))
	return nil
}

// logOffsets records the current size of the members' log files, so a trial reads only its
// own lines.
func (c *Cluster) LogOffsets() []int64 {
	out := make([]int64, len(c.Members))
	for i, m := range c.Members {
		if fi, err := os.Stat(m.LogPath); err == nil {
			out[i] = fi.Size()
		}
	}
	return out
}

// readPhases reads the log lines the members in idxs wrote since offsets and splits the trial
// at t0 (wall clock) into phases.
func (b *bench) readPhases(idxs []int, offsets []int64, t0 time.Time, r trialResult, converged time.Time) phases {
	var firstCandidate, leader time.Time
	var started []time.Time
	for _, i := range idxs {
		ReadLogLines(b.c.Members[i].LogPath, offsets[i], func(l LogLine) {
			t := l.time()
			switch {
			case t.Before(t0):
			case l.Msg == dledger.EventBecomesCandidate && (firstCandidate.IsZero() || t.Before(firstCandidate)):
				firstCandidate = t
			case l.Msg == dledger.EventMemberStarted:
				started = append(started, t)
			case l.Msg == dledger.EventBecomesLeader && l.Self == r.key.ID && l.Term == r.key.Term:
				leader = t
			}
		})
	}
	mark := firstCandidate
	if b.opts.Scenario == ScenarioColdStart {
		// A quorum must serve before anyone can win: the moment the quorum-th member came up
		// ends the part of a cold start that no election rule can shorten.
		mark = time.Time{}
		if q := len(b.c.Members)/2 + 1; len(started) >= q {
			slices.SortFunc(started, time.Time.Compare)
			mark = started[q-1]
		}
	}
	if mark.IsZero() || leader.IsZero() || leader.Before(mark) {
		return phases{}
	}
	return phases{ok: true, detect: mark.Sub(t0), elect: leader.Sub(mark), spread: converged.Sub(leader)}
}

// ReadLogLines calls fn for every JSON line of path after offset (other lines are skipped).
func ReadLogLines(path string, offset int64, fn func(LogLine)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l LogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && !l.time().IsZero() {
			fn(l)
		}
	}
}
