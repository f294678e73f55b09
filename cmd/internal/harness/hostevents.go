package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
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
	var l groupLogLine
	if json.Unmarshal(line, &l) != nil || !watchedEvents[l.Msg] || time.Time(l.TS).IsZero() {
		return GroupEvent{}, false
	}
	return GroupEvent{Host: j, At: time.Time(l.TS), Msg: l.Msg, Group: l.Group, Self: l.Self, Term: l.Term}, true
}

// FirstLeaders returns, for every group in want, the first EventBecomesLeader of evs at or
// after since whose term is above want's value for that group (-1: any term; the first
// election may be won at term 0) and whose host is
// not skip (-1: none skipped). Groups without one are absent.
func FirstLeaders(evs []GroupEvent, since time.Time, want map[string]int64, skip int) map[string]GroupEvent {
	out := map[string]GroupEvent{}
	for _, e := range evs {
		if e.Msg != dledger.EventBecomesLeader || e.At.Before(since) || e.Host == skip {
			continue
		}
		above, ok := want[e.Group]
		if !ok || e.Term <= above {
			continue
		}
		if first, seen := out[e.Group]; !seen || e.At.Before(first.At) {
			out[e.Group] = e
		}
	}
	return out
}

// Latencies are the times from t0 to each event.
func Latencies(evs map[string]GroupEvent, t0 time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.At.Sub(t0))
	}
	return out
}
