package daemon

// The watch API: role events over HTTP for applications that do not embed the member (a C++
// broker, a database manager, a load balancer's agent).
//
//	GET /v1/watch                       Server-Sent Events, one per role event, in order
//	GET /v1/leader?wait=30s&index=N     long poll: answers once the latest seq is past N
//
// One watchHub per member takes the events from the dispatcher (a listener like any other)
// and keeps the last watchRingSize of them, so a client that lost its connection resumes where
// it stopped. It never blocks: every stream has a bounded buffer, and a stream that falls
// behind is ended (after what it has buffered) rather than waited for; its client reconnects
// and resumes from the ring. So no client, slow or dead, can slow the elector or the other
// listeners.
//
// Seqs count a member's events from 1 and start again when the member restarts, so a stream's
// event id also names the member's incarnation ("17@3f9a0c21d4e5b687"): a client resuming
// across a restart is told it missed events instead of silently skipping the new incarnation's
// first ones.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"

	"github.com/dledger-go/dledger/server/adminclient"
)

// Watch API bounds.
const (
	// watchRingSize events are kept for clients that resume.
	watchRingSize = 1024
	// watchClientBuffer events may wait for one slow stream before it is ended.
	watchClientBuffer = 64
	// maxWatchers bounds the open streams and waiting long polls of one member together; the
	// next ones get 503 with Retry-After.
	maxWatchers = 64
	// maxLongPollWait bounds ?wait= (a longer wait is cut to it, as Consul does).
	maxLongPollWait = 5 * time.Minute
)

// Variables only so that tests need not wait for them.
var (
	// watchKeepalive (a hub's default) is the period of the ": keepalive" comment lines that keep proxies from
	// closing an idle stream (most cut idle connections after 30-60 s).
	watchKeepalive = 15 * time.Second
	// watchWriteTimeout bounds each write to a stream: a client that stops reading is cut off
	// once the socket's buffers are full. The listener's WriteTimeout would end every stream
	// after a few seconds, so each write extends the deadline instead.
	watchWriteTimeout = 10 * time.Second
)

// watchHub fans role events out to HTTP clients and keeps the recent ones.
type watchHub struct {
	// instance names this incarnation of the member in event ids (instanceID): 8 random
	// bytes, formatted when a client is sent one, not kept as a string of its own by each of
	// a host's thousands of hubs.
	instance [8]byte
	// who is the member's group and id (the daemon's record of it), not two strings of the
	// hub's own: a hub per member of a host of thousands fits the 128-byte allocation class.
	who       *memberConfig
	keepalive time.Duration // watchKeepalive (tests set it before serving)

	mu sync.Mutex
	// ring holds the last watchRingSize events, ring[head] the oldest of n. It grows as events
	// come: a host's thousands of members each see a few events, and a full ring per member
	// (about 100 KiB) would be most of a host's memory.
	ring     []ringEvent
	leaders  leaderTable // the leader ids the ring's events name (ringEvent.leader)
	head, n  int32       // at most watchRingSize
	watchers map[*watcher]struct{}
	changed  chan struct{} // closed on every event (wakes long polls); nil: no one waits (changedLocked makes it)
	polls    int32         // long polls waiting (at most maxWatchers); beside ended: one word
	ended    bool          // the member stopped: its last event (UNKNOWN) was published
}

// watcher is one open stream. The hub closes ch to end it: after the member's last event, or
// when the client fell watchClientBuffer events behind.
type watcher struct {
	ch chan dledger.RoleEvent
}

// newWatchHub is the hub of the member who names (who is kept, not copied).
//
// Its ring is made here, with room for the first watchRingFirst events, not at the first
// event: every member sees a few events in a cold start, and a ring made then, among the
// elections' garbage of a host of thousands of groups, is one of the few long-lived objects
// that keep whole spans of that garbage's size class mapped once it is collected (issue 29,
// docs/design.md "What a member costs, a seventh time"); made with the member, it sits with
// the member's other records.
func newWatchHub(who *memberConfig) *watchHub {
	h := &watchHub{who: who, keepalive: watchKeepalive, ring: make([]ringEvent, 0, watchRingFirst)}
	rand.Read(h.instance[:]) // never fails (crypto/rand)
	return h
}

// instanceID is the member's incarnation as event ids name it: 16 hex digits.
func (h *watchHub) instanceID() string { return hex.EncodeToString(h.instance[:]) }

// watchRingFirst is the room a ring is made with, and the least it grows by: a member of a
// host sees a few events in a cold start (two or three: candidate, then leader or follower).
const watchRingFirst = 4

// growRing makes room for one more event: by a quarter, not append's doubling, as a member of
// a host saw 17-32 events in a cold start of 1,000 groups, and a ring doubled to 32 held
// 1.4 KiB unused, times the host's members.
func growRing(ring []ringEvent) []ringEvent {
	if len(ring) < cap(ring) {
		return ring
	}
	grown := make([]ringEvent, len(ring), len(ring)+min(max(watchRingFirst, len(ring)/4), watchRingSize-len(ring)))
	copy(grown, ring)
	return grown
}

// ringEvent is a RoleEvent as the ring keeps it, in 32 bytes instead of 88: a churning cold
// start of 3,000 groups left each member's ring some 36 events, 3.2 KiB a member and a quarter
// of a host's live heap (issue 29, BENCHMARKS.md "where a host's RSS goes"). Its group is the
// hub's (every event of a member is of its group), Missed is never kept (a marker clears the
// ring instead), of At the wall clock is all that is read (eventJSON writes it in UTC), and the
// leader is an index into the hub's leaders, the few ids its group's leaders had.
type ringEvent struct {
	seq    uint64
	term   int64
	at     int64 // At in Unix nanoseconds; noTime for the zero time
	leader uint16
	role   protocol.Role
}

// noTime stands for the zero time.Time, whose Unix nanoseconds int64 cannot hold.
const noTime = math.MinInt64

// maxLeaders bounds a hub's table of leader ids (leaderLocked compacts it when full); a
// variable only so that a test can reach it.
var maxLeaders = math.MaxUint16 + 1

// toRingLocked is ev as the ring keeps it.
func (h *watchHub) toRingLocked(ev dledger.RoleEvent) ringEvent {
	at := int64(noTime)
	if !ev.At.IsZero() {
		at = ev.At.UnixNano()
	}
	return ringEvent{seq: ev.Seq, term: ev.Term, at: at, leader: h.leaderLocked(ev.LeaderID), role: ev.Role}
}

// leaderLocked is id's index in the hub's table of leader ids, added if new. A full table
// (65,536 ids, which only a group whose membership changed tens of thousands of times could
// reach) is rebuilt from the ids the ring still holds, at most watchRingSize, before a new one
// is added.
func (h *watchHub) leaderLocked(id string) uint16 {
	if h.leaders.count() >= maxLeaders && h.leaders.index(id) < 0 {
		old := h.leaders
		h.leaders = leaderTable{}
		for i := range h.n {
			r := &h.ring[(h.head+i)%watchRingSize]
			r.leader = h.leaders.indexOf(old.at(r.leader))
		}
	}
	return h.leaders.indexOf(id)
}

// leaderTable is a hub's leader ids: index 0 is "" (no leader), 1 is one ("" while unused)
// and the others are more[i-2]. A member of a host names "" and one leader in its cold start,
// and a slice of them was an allocation each member kept, made in the cold start (issue 29).
type leaderTable struct {
	one  string
	more []string
}

// indexOf is id's index, added if new.
func (t *leaderTable) indexOf(id string) uint16 {
	if i := t.index(id); i >= 0 {
		return uint16(i)
	}
	if t.one == "" {
		t.one = id
		return 1
	}
	t.more = append(t.more, id)
	return uint16(len(t.more) + 1)
}

// index is id's index, or -1.
func (t *leaderTable) index(id string) int {
	switch {
	case id == "":
		return 0
	case id == t.one:
		return 1
	}
	if i := slices.Index(t.more, id); i >= 0 {
		return i + 2
	}
	return -1
}

// at is the id at index i.
func (t *leaderTable) at(i uint16) string {
	switch i {
	case 0:
		return ""
	case 1:
		return t.one
	}
	return t.more[i-2]
}

// count is how many ids the table holds, "" included.
func (t *leaderTable) count() int {
	n := 1 + len(t.more)
	if t.one != "" {
		n++
	}
	return n
}

// eventLocked is the RoleEvent r keeps.
func (h *watchHub) eventLocked(r ringEvent) dledger.RoleEvent {
	ev := dledger.RoleEvent{Group: h.who.Group, Seq: r.seq, Term: r.term, Role: r.role, LeaderID: h.leaders.at(r.leader)}
	if r.at != noTime {
		ev.At = time.Unix(0, r.at)
	}
	return ev
}

// publish is the hub's role-event listener. It never blocks.
func (h *watchHub) publish(ev dledger.RoleEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Missed > 0 && !h.ended {
		h.missedLocked()
		return
	}
	if h.ended || (h.n > 0 && ev.Seq <= h.latestLocked().Seq) {
		return
	}
	if h.n == watchRingSize {
		h.ring[h.head] = h.toRingLocked(ev)
		h.head = (h.head + 1) % watchRingSize
	} else {
		if p := (h.head + h.n) % watchRingSize; int(p) < len(h.ring) {
			h.ring[p] = h.toRingLocked(ev)
		} else { // not full, so head is 0 and p is len(ring)
			r := h.toRingLocked(ev) // before growRing: a compaction of leaders walks the ring
			h.ring = append(growRing(h.ring), r)
		}
		h.n++
	}
	for w := range h.watchers {
		select {
		case w.ch <- ev:
		default: // fell behind: end its stream after what it has; it resumes from the ring
			delete(h.watchers, w)
			close(w.ch)
		}
	}
	h.wakeLocked()
	// UNKNOWN is never an election event: the member stopped, and nothing follows. Ending the
	// streams also lets the HTTP server's Shutdown finish (it waits for idle connections).
	if ev.Role == protocol.UNKNOWN {
		h.ended = true
		for w := range h.watchers {
			delete(h.watchers, w)
			close(w.ch)
		}
	}
}

// awaitEnd waits, until ctx ends, for the hub to have the member's final event (its
// subscription delivers the events before it first, in order), and reports whether it has.
func (h *watchHub) awaitEnd(ctx context.Context) bool {
	for {
		h.mu.Lock()
		ended, changed := h.ended, h.changedLocked()
		h.mu.Unlock()
		if ended {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// end ends the hub of a member that stopped without a final event (it never started): open
// streams end, waiting long polls answer, and nothing follows.
func (h *watchHub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.ended = true
	for w := range h.watchers {
		delete(h.watchers, w)
		close(w.ch)
	}
	h.wakeLocked()
}

// changedLocked is the channel the next event closes, made when first asked for: a host's
// thousands of members are mostly never long-polled, and a channel is 96 bytes (issue 29).
func (h *watchHub) changedLocked() chan struct{} {
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

// wakeLocked wakes whoever waits on changed; the next waiter gets a new channel.
func (h *watchHub) wakeLocked() {
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}

// missedLocked is the hub's answer to a marker (its listener queue overflowed, so events are
// missing after the ring's newest): the ring forgets what it has, so a client resuming from
// before the gap is told it missed events (FirstKept is then the next event, the current
// state), and every open stream is ended after what it has buffered, to resume that way.
func (h *watchHub) missedLocked() {
	h.ring, h.head, h.n, h.leaders = nil, 0, 0, leaderTable{}
	for w := range h.watchers {
		delete(h.watchers, w)
		close(w.ch)
	}
}

func (h *watchHub) latestLocked() dledger.RoleEvent {
	return h.eventLocked(h.ring[(h.head+h.n-1)%watchRingSize])
}

// resumePoint is where a client says it stopped: Last-Event-ID or ?since=, as "SEQ@INSTANCE"
// (a stream's event id) or a bare "SEQ" (taken to mean this incarnation).
type resumePoint struct {
	given    bool
	seq      uint64
	instance string // "" with a bare seq
}

func parseResumePoint(s string) (resumePoint, error) {
	if s == "" {
		return resumePoint{}, nil
	}
	seqText, inst, _ := strings.Cut(s, "@")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil || len(inst) > 64 {
		return resumePoint{}, fmt.Errorf("bad event id %q: want SEQ or SEQ@INSTANCE, as a stream's id: lines", s)
	}
	return resumePoint{given: true, seq: seq, instance: inst}, nil
}

var errTooManyWatchers = fmt.Errorf("too many watchers (at most %d streams and long polls per member)", maxWatchers)

// subscribe registers a stream resuming from p and returns, taken atomically with the
// registration (no event is lost or sent twice between them): the missed notice if any, the
// events to send first, and the watcher that receives the later ones (its ch is already closed
// when the member has stopped).
func (h *watchHub) subscribe(p resumePoint) (*watcher, *adminclient.MissedJSON, []dledger.RoleEvent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.watchers)+int(h.polls) >= maxWatchers {
		return nil, nil, nil, errTooManyWatchers
	}
	missed, replay := h.replayLocked(p)
	w := &watcher{ch: make(chan dledger.RoleEvent, watchClientBuffer)}
	if h.ended {
		close(w.ch)
	} else {
		if h.watchers == nil { // made by the first stream: most members of a host have none
			h.watchers = map[*watcher]struct{}{}
		}
		h.watchers[w] = struct{}{}
	}
	return w, missed, replay, nil
}

// replayLocked is what a client resuming from p must be sent before the live events.
func (h *watchHub) replayLocked(p resumePoint) (*adminclient.MissedJSON, []dledger.RoleEvent) {
	current := func() []dledger.RoleEvent {
		if h.n == 0 {
			return nil // the first event is on its way (Start publishes it at once)
		}
		return []dledger.RoleEvent{h.latestLocked()}
	}
	if !p.given {
		return nil, current()
	}
	missed := &adminclient.MissedJSON{Missed: true, Since: p.seq, Instance: h.instanceID()}
	// Another incarnation's id, or a seq this incarnation has not reached (the member restarted
	// since and its seqs began again): everything before now is unknown to the client.
	if (p.instance != "" && p.instance != h.instanceID()) || (h.n == 0 && p.seq > 0) ||
		(h.n > 0 && p.seq > h.latestLocked().Seq) {
		missed.Restarted = true
		if h.n > 0 {
			missed.FirstKept = h.ring[h.head].seq
		}
		return missed, current()
	}
	if h.n == 0 {
		return nil, nil
	}
	first := h.ring[h.head].seq
	if p.seq+1 < first {
		missed.FirstKept = first
		return missed, current()
	}
	var out []dledger.RoleEvent
	for i := range h.n {
		if ev := h.ring[(h.head+i)%watchRingSize]; ev.seq > p.seq {
			out = append(out, h.eventLocked(ev))
		}
	}
	return nil, out
}

func (h *watchHub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watchers[w]; ok {
		delete(h.watchers, w)
		close(w.ch)
	}
}

// await returns the latest event and ok at once when its seq is not index (it is past it, or
// below it: the member restarted, as Consul's index going backwards) or the member stopped.
// Otherwise it registers a long poll and returns the channel that is closed on the next
// event; release must be called when the poll ends.
func (h *watchHub) await(index uint64) (ev dledger.RoleEvent, ok bool, changed <-chan struct{}, release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n > 0 {
		ev = h.latestLocked()
	}
	if (h.n > 0 && ev.Seq != index) || h.ended {
		return ev, true, nil, nil, nil
	}
	if len(h.watchers)+int(h.polls) >= maxWatchers {
		return ev, false, nil, nil, errTooManyWatchers
	}
	h.polls++
	return ev, false, h.changedLocked(), func() {
		h.mu.Lock()
		h.polls--
		h.mu.Unlock()
	}, nil
}

// latest is the latest event, if any.
func (h *watchHub) latest() (dledger.RoleEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return dledger.RoleEvent{}, false
	}
	return h.latestLocked(), true
}

func (h *watchHub) eventJSON(ev dledger.RoleEvent) adminclient.EventJSON {
	return adminclient.EventJSON{Seq: ev.Seq, Term: ev.Term, Role: ev.Role.String(), Leader: ev.LeaderID,
		Time: ev.At.UTC().Format(time.RFC3339Nano), Member: h.who.SelfID, Group: h.who.Group, Instance: h.instanceID()}
}

// watchRoutes adds GET /v1/watch to mux (both listeners: it only reads).
func (m *member) watchRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/watch", m.serveWatch)
}

// serveWatch streams role events as Server-Sent Events. Each event is
//
//	id: <seq>@<instance>
//	data: {"seq":..,"term":..,"role":..,"leader":..,"time":..,"member":..,"instance":..}
//
// The first is the current state; a client that sends Last-Event-ID (or ?since=) gets the
// events after it instead, or, if they are no longer kept, "event: missed" and then the current
// state. The stream ends after the member's last event (UNKNOWN: it stopped), and when the
// client falls behind (it reconnects and resumes).
func (m *member) serveWatch(w http.ResponseWriter, r *http.Request) {
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("since")
	}
	p, err := parseResumePoint(from)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	wt, missed, replay, err := m.watch.subscribe(p)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: err.Error()})
		return
	}
	defer m.watch.unsubscribe(wt)
	// The listener's WriteTimeout would cut the stream after a few seconds: every write sets
	// its own deadline instead (flushTo). Its read timeout does not matter here: net/http lifts
	// the read deadline once a body-less request is read. A dead client is found by the write
	// deadlines (once the socket's buffers are full) and TCP keepalive.
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	var buf strings.Builder
	buf.WriteString("retry: 2000\n\n") // an EventSource reconnects after 2 s
	if missed != nil {
		b, _ := json.Marshal(missed)
		fmt.Fprintf(&buf, "event: missed\ndata: %s\n\n", b)
	}
	for _, ev := range replay {
		m.writeEvent(&buf, ev)
	}
	if !flushTo(w, rc, buf.String()) {
		return
	}
	m.streamEvents(w, rc, wt.ch, r.Context().Done())
}

// streamEvents sends the events of ch as they come, and a keepalive comment when none came for
// a while, until ch is closed (after its last event is sent), done, or a write fails.
func (m *member) streamEvents(w http.ResponseWriter, rc *http.ResponseController, ch <-chan dledger.RoleEvent, done <-chan struct{}) {
	keepalive := time.NewTicker(m.watch.keepalive)
	defer keepalive.Stop()
	var buf strings.Builder
	for {
		buf.Reset()
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			m.writeEvent(&buf, ev)
			if !m.writeQueued(&buf, ch) {
				flushTo(w, rc, buf.String())
				return
			}
		case <-keepalive.C:
			buf.WriteString(": keepalive\n\n")
		case <-done:
			return
		}
		if !flushTo(w, rc, buf.String()) {
			return
		}
	}
}

// writeQueued adds the events already queued in ch to buf, to go in the same write; false
// when ch is closed.
func (m *member) writeQueued(buf *strings.Builder, ch <-chan dledger.RoleEvent) bool {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return false
			}
			m.writeEvent(buf, ev)
		default:
			return true
		}
	}
}

func (m *member) writeEvent(buf *strings.Builder, ev dledger.RoleEvent) {
	b, _ := json.Marshal(m.watch.eventJSON(ev))
	fmt.Fprintf(buf, "id: %d@%s\ndata: %s\n\n", ev.Seq, m.watch.instanceID(), b)
}

// flushTo writes text within watchWriteTimeout and flushes it; false: the client is gone.
func flushTo(w http.ResponseWriter, rc *http.ResponseController, text string) bool {
	if err := rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
		return false
	}
	if _, err := io.WriteString(w, text); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// serveLeaderWait answers GET /v1/leader?wait=D&index=N, the long-poll form of the leader
// check, and reports false (leaving the request to the health check) when there is no wait
// parameter. It answers once the member's latest event seq differs from N (N=0 or absent: at
// once), or after D (at most maxLongPollWait), always 200 with adminclient.LeaderWaitJSON: a long poll
// reports the state, whatever it is; the health semantics (200 only on the leader) stay with
// the plain GET /v1/leader, which load balancers use. 400: bad parameters; 503 with
// Retry-After: too many watchers.
func (m *member) serveLeaderWait(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if !q.Has("wait") {
		return false
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		badRequest(w, "wait=%q: %v", q.Get("wait"), err)
		return true
	}
	var index uint64
	if v := q.Get("index"); v != "" {
		if index, err = strconv.ParseUint(v, 10, 64); err != nil {
			badRequest(w, "index=%q: want the index (seq) of the last answer", v)
			return true
		}
	}
	ev, ok, changed, release, err := m.watch.await(index)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: err.Error()})
		return true
	}
	if !ok {
		defer release()
		// As for a stream: the listener's write timeout is shorter than a long poll.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + watchWriteTimeout))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-changed:
		case <-t.C:
		case <-r.Context().Done():
			return true
		}
		ev, _ = m.watch.latest()
	}
	if ev.Seq == 0 { // no event yet (the member is starting): its state as Status sees it
		st := m.s.FullStatus()
		ev = dledger.RoleEvent{Group: st.Group, Term: st.Term, Role: st.Role, LeaderID: st.LeaderID, At: time.Now()}
	}
	w.Header().Set("X-DLedger-Index", strconv.FormatUint(ev.Seq, 10))
	writeJSON(w, http.StatusOK, adminclient.LeaderWaitJSON{Index: ev.Seq, EventJSON: m.watch.eventJSON(ev), IsLeader: ev.Role == protocol.LEADER})
	return true
}

// parseWait reads ?wait=: a duration ("30s", "2m") or whole seconds ("30"), cut to
// maxLongPollWait.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseUint(v, 10, 32)
		if nerr != nil {
			return 0, errors.New("want a duration (30s, 2m) or seconds")
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 {
		return 0, errors.New("negative wait")
	}
	return min(d, maxLongPollWait), nil
}
