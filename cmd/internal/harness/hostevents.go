package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dledger-go/dledger/dledger"
)

// GroupEvent is one elector event a host logged (dledger's Event* messages, which carry the
// member's group, self and term): the benchmark's latencies are the events' own timestamps,
// taken in the host at the moment it changed role, not when a poller happened to see it.
type GroupEvent struct {
	Host  int
	At    time.Time
	Msg   string
	Group string
	Self  string
	Term  int64
}

// groupLogLine is the part of a host's zap JSON line an event needs.
type groupLogLine struct {
	TS    logTime `json:"ts"`
	Msg   string  `json:"msg"`
	Group string  `json:"group"`
	Self  string  `json:"self"`
	Term  int64   `json:"term"`
}

// watchedEvents are the messages a LogFollower keeps.
var watchedEvents = map[string]bool{
	dledger.EventBecomesLeader:    true,
	dledger.EventBecomesCandidate: true,
	dledger.EventMemberStarted:    true,
}

// LogFollower reads the hosts' log files as they grow and keeps their group events. It holds
// a partial last line until its newline arrives. Not safe for concurrent use: the benchmark
// (or a test) calls Poll from the goroutine that waits.
type LogFollower struct {
	paths   []string
	offsets []int64
	partial [][]byte
	Events  []GroupEvent // every event read so far, in the order read (per host: logged order)
}

// NewLogFollower follows the files at paths (host j's log is paths[j]) from their current end:
// earlier runs' lines are not news.
func NewLogFollower(paths []string) *LogFollower {
	f := &LogFollower{paths: paths, offsets: make([]int64, len(paths)), partial: make([][]byte, len(paths))}
	for j, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			f.offsets[j] = fi.Size()
		}
	}
	return f
}

// Poll reads what the files gained since the last call and returns the new events.
func (f *LogFollower) Poll() []GroupEvent {
	start := len(f.Events)
	for j, p := range f.paths {
		f.readFile(j, p)
	}
	return f.Events[start:]
}

func (f *LogFollower) readFile(j int, path string) {
	file, err := os.Open(path)
	if err != nil {
		return // not created yet
	}
	defer file.Close()
	if _, err := file.Seek(f.offsets[j], io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(file)
	if err != nil || len(b) == 0 {
		return
	}
	f.offsets[j] += int64(len(b))
	data := append(f.partial[j], b...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		f.partial[j] = data
		return
	}
	f.partial[j] = append([]byte(nil), data[last+1:]...)
	for _, line := range bytes.Split(data[:last], []byte("\n")) {
		if ev, ok := parseGroupEvent(j, line); ok {
			f.Events = append(f.Events, ev)
		}
	}
}

// parseGroupEvent decodes one log line of host j if it is a watched event with a time.
func parseGroupEvent(j int, line []byte) (GroupEvent, bool) {
	// Cheap test first: most lines of a busy host are no watched event.
	if !bytes.Contains(line, []byte(`"msg":"becomes `)) && !bytes.Contains(line, []byte(`"msg":"member started"`)) {
		return GroupEvent{}, false
	}
	l, ok := scanGroupLogLine(line)
	if !ok && json.Unmarshal(line, &l) != nil {
		return GroupEvent{}, false
	}
	if !watchedEvents[l.Msg] || time.Time(l.TS).IsZero() {
		return GroupEvent{}, false
	}
	return GroupEvent{Host: j, At: time.Time(l.TS), Msg: l.Msg, Group: l.Group, Self: l.Self, Term: l.Term}, true
}

// scanGroupLogLine reads the fields of groupLogLine from one of the members' own zap lines
// without encoding/json, which cost the benchmark 2.8 us a line: in a 10,000-group crash the
// hosts log some 13,000 watched lines within 0.3 s, and the benchmark, polling every 10 ms,
// took an eighth of the machine's two processors from the survivors it measured. ok is false
// for anything it does not read exactly as encoding/json would (an escape, a key missing, a
// number that is no plain integer, a time that is no RFC 3339 text): the caller decodes those
// lines with encoding/json (TestScanGroupLogLineAgreesWithJSON).
func scanGroupLogLine(line []byte) (l groupLogLine, ok bool) {
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' || bytes.IndexByte(line, '\\') >= 0 {
		return l, false
	}
	ts, ok1 := scanString(line, `"ts":"`)
	msg, ok2 := scanString(line, `"msg":"`)
	group, ok3 := scanString(line, `"group":"`)
	self, ok4 := scanString(line, `"self":"`)
	term, ok5 := scanInt(line, `"term":`)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return l, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return l, false
	}
	return groupLogLine{TS: logTime(t), Msg: msg, Group: group, Self: self, Term: term}, true
}

// scanString is the text between key (which ends in an opening quote) and the next quote, if
// key occurs exactly once in line: a key twice (a nested object's, a repeated field) is left to
// encoding/json, which keeps the last.
func scanString(line []byte, key string) (string, bool) {
	i := bytes.Index(line, []byte(key))
	if i < 0 || bytes.Index(line[i+len(key):], []byte(key)) >= 0 {
		return "", false
	}
	rest := line[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// scanInt is the decimal integer after key, if key occurs exactly once and the number ends at a
// comma or the line's closing brace.
func scanInt(line []byte, key string) (int64, bool) {
	i := bytes.Index(line, []byte(key))
	if i < 0 || bytes.Index(line[i+len(key):], []byte(key)) >= 0 {
		return 0, false
	}
	rest := line[i+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end <= 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
}

// FirstLeaders returns, for every group in want, the first EventBecomesLeader of evs at or
// after since whose term is above want's value for that group (-1: any term; the first
// election may be won at term 0) and whose host is
// not skip (-1: none skipped). Groups without one are absent.
func FirstLeaders(evs []GroupEvent, since time.Time, want map[string]int64, skip int) map[string]GroupEvent {
	w := NewLeaderWatch(since, want, skip)
	w.Add(evs)
	return w.Led
}

// LeaderWatch is FirstLeaders kept up to date as a LogFollower's events grow, each event looked
// at once. The benchmark waits for a crash's (or a cold start's) leaders by polling every 10 ms;
// FirstLeaders over every event read so far, some 60,000 by the crash, took 2-4 ms a poll, a
// quarter of a processor taken from the hosts it measured.
type LeaderWatch struct {
	since time.Time
	want  map[string]int64
	skip  int
	seen  int                   // how many of the events Add was given it has looked at
	Led   map[string]GroupEvent // what FirstLeaders would return for the events so far
}

// NewLeaderWatch watches for FirstLeaders(evs, since, want, skip).
func NewLeaderWatch(since time.Time, want map[string]int64, skip int) *LeaderWatch {
	return &LeaderWatch{since: since, want: want, skip: skip, Led: map[string]GroupEvent{}}
}

// Add looks at the events of evs it has not seen: evs is the whole list so far (a
// LogFollower's Events), of which the first calls' part is unchanged.
func (w *LeaderWatch) Add(evs []GroupEvent) {
	for _, e := range evs[min(w.seen, len(evs)):] {
		if e.Msg != dledger.EventBecomesLeader || e.At.Before(w.since) || e.Host == w.skip {
			continue
		}
		above, ok := w.want[e.Group]
		if !ok || e.Term <= above {
			continue
		}
		if first, seen := w.Led[e.Group]; !seen || e.At.Before(first.At) {
			w.Led[e.Group] = e
		}
	}
	w.seen = len(evs)
}

// Latencies are the times from t0 to each event.
func Latencies(evs map[string]GroupEvent, t0 time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.At.Sub(t0))
	}
	return out
}
