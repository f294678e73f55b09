// Package broker is the reference broker: a replicated append-only log over the embedding API
// (package server). It is the runnable version of the README's embedding section, small enough
// to read in one sitting, and the system under test of the nemesis (cmd/dledger-broker).
//
// The rules, each tied to the guarantee it buys (no acknowledged append is ever lost):
//   - Only the leader of the current term appends, and stamps each entry with that term; the
//     term comes from the election member's role event, so it is the fencing token.
//   - An append is acknowledged once a quorum has it fsynced (the leader counts itself).
//   - A member refuses appends from a term older than the highest it has seen (its durable
//     promise, or its election member's term): a deposed leader cannot overwrite anything.
//   - After every durable change a member reports its ledger end (last entry's term, index)
//     to its election member, so a vote compares against what survives a crash.
//   - A new leader first appends a barrier entry of its term and replicates its whole log to a
//     quorum (followers truncate a divergent suffix); only then it calls SetLeaderReady and
//     serves. The barrier is what commits the older entries it carries (Raft's rule: an entry
//     of an older term is committed only under one of the current term).
//   - Reads are served by the ready leader only, and only after a quorum has answered a round
//     sent after the read arrived: a deposed leader that does not know it yet cannot answer.
package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/server"
)

// Config is one broker member.
type Config struct {
	// Election is the embedded election member's config. The broker sets Ledger (storage:
	// the member starts only after its ledger is reported) and LeaderReadyGate itself.
	Election server.Config
	// Dir holds the log.
	Dir string
	// Brokers maps every member id (Election.Peers' ids) to its broker HTTP address host:port.
	Brokers map[string]string
	// IgnoreLedger switches the ledger rule off: the member reports an empty ledger, so votes
	// and hand-overs ignore how far each log goes. For the nemesis's negative control only: it
	// elects stale members and loses acknowledged appends.
	IgnoreLedger bool
	// Faults enables POST /debug/fault (drop or delay this member's outgoing replication): the
	// nemesis's data-path partitions where network namespaces are not available.
	Faults bool
	// AppendTimeout bounds how long an append or read waits for a quorum (default 2 s).
	AppendTimeout time.Duration
	// StallLimit is how long one write of the log may take before the disk is called
	// unhealthy (default 1 s): see durableLocked.
	StallLimit time.Duration
	Logger     *zap.Logger
}

// Broker is one member: its log, its election member, and its HTTP API (Handler).
type Broker struct {
	cfg  Config
	log  *zap.Logger
	srv  *server.Server
	http *http.Client

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change waiters care about
	l       *Log
	lead    *leadership // nil unless this member leads
	faults  faults
}

// leadership is the state of one term this member leads.
type leadership struct {
	term    int64
	ready   bool
	barrier int64 // index of this term's barrier entry
	commit  int64 // highest index a quorum has durably, of this term or before one of it
	peers   map[string]*follower
	readSeq int64
	cancel  context.CancelFunc
}

type follower struct {
	next, match int64
	ackedSeq    int64
	wake        chan struct{}
}

type faults struct {
	drop  map[string]bool
	delay time.Duration
	stall time.Duration // every write of the log first sleeps this long (a stalled disk)
	full  bool          // every write of the log fails with ENOSPC
}

// New opens the log and creates the election member (not started: see Start).
func New(cfg Config, opts ...server.Option) (*Broker, error) {
	if cfg.AppendTimeout <= 0 {
		cfg.AppendTimeout = 2 * time.Second
	}
	if cfg.StallLimit <= 0 {
		cfg.StallLimit = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	l, err := OpenLog(cfg.Dir)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: cfg.Logger, l: l, changed: make(chan struct{}),
		http: &http.Client{Timeout: time.Second}}
	l.fault = b.diskFault
	cfg.Election.Ledger = server.LedgerStorage
	cfg.Election.LeaderReadyGate = true
	opts = append(opts, server.WithLogger(cfg.Logger), server.WithListener(b.onRole))
	b.srv, err = server.New(cfg.Election, opts...)
	if err != nil {
		l.Close()
		return nil, err
	}
	return b, nil
}

// Server is the embedded election member.
func (b *Broker) Server() *server.Server { return b.srv }

// Start reports the ledger end, then starts the election member.
func (b *Broker) Start() error {
	b.mu.Lock()
	err := b.reportLocked()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.srv.Start()
}

// Stop stops the election member (a leader hands over first) and closes the log.
func (b *Broker) Stop(ctx context.Context) error {
	err := b.srv.Stop(ctx)
	b.mu.Lock()
	b.stepDownLocked()
	b.l.Close()
	b.mu.Unlock()
	return err
}

// reportLocked tells the election member the durable ledger end (empty with IgnoreLedger).
func (b *Broker) reportLocked() error {
	t, i := b.l.End()
	if b.cfg.IgnoreLedger {
		t, i = -1, -1
	}
	return b.srv.UpdateLedger(t, i)
}

// durableLocked runs one write of the log and tells the election member how the disk is doing
// (the storage-health half of the embedding API): a write that fails (a full or read-only disk)
// or is still running after StallLimit (a stalled fsync) makes the member abstain through
// StorageUnhealthy, so a leader steps down at once and the member is no candidate and no
// hand-over target; the next write that succeeds reports the ledger, which ends it.
func (b *Broker) durableLocked(what string, write func() error) error {
	var mu sync.Mutex
	finished := false
	t := time.AfterFunc(b.cfg.StallLimit, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			b.log.Warn("disk write stalled: abstaining", zap.String("write", what), zap.Duration("limit", b.cfg.StallLimit))
			b.srv.StorageUnhealthy(what + ": write stalled")
		}
	})
	err := write()
	t.Stop()
	mu.Lock()
	finished = true
	mu.Unlock()
	if err != nil {
		b.log.Warn("disk write failed: abstaining", zap.String("write", what), zap.Error(err))
		b.srv.StorageUnhealthy(what + ": " + err.Error())
		return err
	}
	if err := b.reportLocked(); err != nil {
		b.log.Warn("update ledger", zap.Error(err))
	}
	return nil
}

// diskFault is the Log's test seam (b.mu is held: every write of the log is made under it).
func (b *Broker) diskFault() error {
	if b.faults.full {
		return syscall.ENOSPC
	}
	if b.faults.stall > 0 {
		time.Sleep(b.faults.stall)
	}
	return nil
}

// electionMovedPast says whether the election member has moved past term since this member
// wrote to its log. It is asked after the write and its ledger report, and closes a race: a
// vote for a newer term's candidate granted before the report compared the candidate against
// the old ledger end, so the candidate may lack the entry just written; counting that entry
// (the leader counting itself, a follower acknowledging) could then acknowledge an append the
// new leader truncates. A vote granted after the report compares the new end. Both the report
// and the vote hold the elector's lock, so one of the two always happens first.
func (b *Broker) electionMovedPast(term int64) bool {
	return b.srv.Status().Term > term
}

func (b *Broker) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// waitLocked waits (b.mu held, released meanwhile) until cond holds or the deadline passes.
func (b *Broker) waitLocked(deadline time.Time, cond func() bool) bool {
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		ch := b.changed
		b.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		b.mu.Lock()
	}
	return true
}

// ---- leadership ----

// onRole runs on the listener's goroutine, in event order.
func (b *Broker) onRole(ev server.RoleEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Role != server.Leader {
		b.stepDownLocked()
		return
	}
	if b.lead != nil && b.lead.term == ev.Term {
		return
	}
	b.stepDownLocked()
	if b.l.Promised() > ev.Term {
		b.log.Warn("elected for a term older than one already accepted: not serving", zap.Int64("term", ev.Term))
		return
	}
	if err := b.durableLocked("promise", func() error { return b.l.Promise(ev.Term) }); err != nil {
		return
	}
	if err := b.durableLocked("barrier", func() error { return b.l.Append(Entry{Term: ev.Term}) }); err != nil {
		return
	}
	if b.electionMovedPast(ev.Term) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ld := &leadership{term: ev.Term, barrier: b.l.Len() - 1, commit: -1, peers: map[string]*follower{}, cancel: cancel}
	for id := range b.cfg.Brokers {
		if id == b.cfg.Election.SelfID {
			continue
		}
		f := &follower{next: b.l.Len(), match: -1, wake: make(chan struct{}, 1)}
		ld.peers[id] = f
		go b.replicate(ctx, ld, id, f)
	}
	b.lead = ld
	b.advanceCommitLocked(ld)
	b.notifyLocked()
	go b.awaitReady(ld)
}

func (b *Broker) stepDownLocked() {
	if b.lead != nil {
		b.lead.cancel()
		b.lead = nil
		b.notifyLocked()
	}
}

// awaitReady is the leader-ready gate: serve once the barrier is on a quorum.
func (b *Broker) awaitReady(ld *leadership) {
	b.mu.Lock()
	ok := b.waitLocked(time.Now().Add(time.Hour), func() bool { return b.lead != ld || ld.commit >= ld.barrier })
	if !ok || b.lead != ld {
		b.mu.Unlock()
		return
	}
	ld.ready = true
	b.notifyLocked()
	b.mu.Unlock()
	if err := b.srv.SetLeaderReady(ld.term); err != nil {
		b.log.Info("leader ready refused", zap.Int64("term", ld.term), zap.Error(err))
	}
	b.log.Info("leader ready", zap.Int64("term", ld.term), zap.Int64("barrier", ld.barrier))
}

func (b *Broker) wakeAllLocked(ld *leadership) {
	for _, f := range ld.peers {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// advanceCommitLocked sets commit to the highest index a quorum holds, if it is of this term.
func (b *Broker) advanceCommitLocked(ld *leadership) {
	m := []int64{b.l.Len() - 1}
	for _, f := range ld.peers {
		m = append(m, f.match)
	}
	sort.Slice(m, func(i, j int) bool { return m[i] > m[j] })
	q := m[len(m)/2] // the quorum-th largest: len/2+1 members hold it
	if q > ld.commit && q >= 0 && b.l.TermAt(q) == ld.term {
		ld.commit = q
		b.notifyLocked()
	}
}

// AppendRequest is the replication message from the leader of Term.
type AppendRequest struct {
	Term      int64   `json:"term"`
	Leader    string  `json:"leader"`
	PrevIndex int64   `json:"prevIndex"`
	PrevTerm  int64   `json:"prevTerm"`
	Entries   []Entry `json:"entries"`
}

// AppendResponse answers it: OK, or the member's term when it refused an old one, or its end
// (a hint for where to resume) when the previous entry did not match.
type AppendResponse struct {
	OK   bool  `json:"ok"`
	Term int64 `json:"term"`
	End  int64 `json:"end"`
}

const maxBatch = 256

// replicate brings one follower to the leader's log, and keeps it there, while ld leads.
func (b *Broker) replicate(ctx context.Context, ld *leadership, id string, f *follower) {
	for ctx.Err() == nil {
		b.mu.Lock()
		if b.lead != ld {
			b.mu.Unlock()
			return
		}
		req := AppendRequest{Term: ld.term, Leader: b.cfg.Election.SelfID, PrevIndex: f.next - 1, PrevTerm: b.l.TermAt(f.next - 1)}
		end := min(b.l.Len(), f.next+maxBatch)
		req.Entries = append([]Entry(nil), b.l.entries[f.next:end]...)
		seq := ld.readSeq
		drop, delay := b.faults.drop[id], b.faults.delay
		b.mu.Unlock()

		resp, err := b.send(ctx, id, req, drop, delay)

		b.mu.Lock()
		if b.lead != ld {
			b.mu.Unlock()
			return
		}
		idle := false
		switch {
		case err != nil:
			idle = true
		case resp.Term > ld.term:
			b.log.Info("a newer term exists: stop serving", zap.Int64("term", ld.term), zap.Int64("newer", resp.Term))
			b.stepDownLocked()
			b.mu.Unlock()
			return
		case resp.OK:
			f.match = req.PrevIndex + int64(len(req.Entries))
			f.next = f.match + 1
			f.ackedSeq = max(f.ackedSeq, seq)
			b.advanceCommitLocked(ld)
			b.notifyLocked()
			idle = f.next >= b.l.Len() && ld.readSeq == seq
		default: // the previous entry did not match: back off to the follower's end
			f.next = max(0, min(f.next-1, resp.End+1))
		}
		b.mu.Unlock()
		if idle {
			t := time.NewTimer(50 * time.Millisecond) // the broker's heartbeat: reads need rounds
			select {
			case <-ctx.Done():
			case <-f.wake:
			case <-t.C:
			}
			t.Stop()
		}
	}
}

func (b *Broker) send(ctx context.Context, id string, req AppendRequest, drop bool, delay time.Duration) (AppendResponse, error) {
	if drop {
		return AppendResponse{}, errors.New("dropped by fault")
	}
	if delay > 0 {
		select {
		case <-ctx.Done():
			return AppendResponse{}, ctx.Err()
		case <-time.After(delay):
		}
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.cfg.Brokers[id]+"/internal/append", bytes.NewReader(body))
	if err != nil {
		return AppendResponse{}, err
	}
	res, err := b.http.Do(hreq)
	if err != nil {
		return AppendResponse{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return AppendResponse{}, fmt.Errorf("status %d", res.StatusCode)
	}
	var out AppendResponse
	err = json.NewDecoder(http.MaxBytesReader(nil, res.Body, 1<<20)).Decode(&out)
	return out, err
}

// HandleAppend is the follower's side of replication.
func (b *Broker) HandleAppend(req AppendRequest) (AppendResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := max(b.l.Promised(), b.srv.Status().Term)
	if req.Term < cur {
		return AppendResponse{Term: cur}, nil // the fencing token: an older leader is refused
	}
	if b.lead != nil && b.lead.term >= req.Term {
		return AppendResponse{Term: b.lead.term}, nil // cannot happen with one leader a term
	}
	b.stepDownLocked()
	if err := b.durableLocked("promise", func() error { return b.l.Promise(req.Term) }); err != nil {
		return AppendResponse{}, err
	}
	if req.PrevIndex >= b.l.Len() || (req.PrevIndex >= 0 && b.l.TermAt(req.PrevIndex) != req.PrevTerm) {
		return AppendResponse{Term: req.Term, End: min(b.l.Len(), req.PrevIndex) - 1}, nil
	}
	for i, e := range req.Entries {
		idx := req.PrevIndex + 1 + int64(i)
		if idx < b.l.Len() {
			if b.l.TermAt(idx) == e.Term {
				continue // already there (a retried batch)
			}
			// A divergent suffix: never committed, or this leader would have it.
			if err := b.durableLocked("truncate", func() error { return b.l.TruncateFrom(idx) }); err != nil {
				return AppendResponse{}, err
			}
		}
		if err := b.durableLocked("append", func() error { return b.l.Append(req.Entries[i:]...) }); err != nil {
			return AppendResponse{}, err
		}
		break
	}
	if cur := b.srv.Status().Term; cur > req.Term { // see electionMovedPast: no acknowledgement
		return AppendResponse{Term: cur}, nil
	}
	return AppendResponse{OK: true, Term: req.Term}, nil
}

// AwaitServing waits until this member serves as the ready leader (it returns its term), or
// until ctx ends.
func (b *Broker) AwaitServing(ctx context.Context) (term int64, ok bool) {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.notifyLocked()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waitLocked(time.Now().Add(24*time.Hour), func() bool { return ctx.Err() != nil || (b.lead != nil && b.lead.ready) })
	if b.lead != nil && b.lead.ready {
		return b.lead.term, true
	}
	return 0, false
}

// ---- the client API ----

// ErrNotLeader is returned to a client of a member that does not serve: Leader names the
// member that leads (and LeaderAddr its broker address) when known; with none known an
// election is in progress and the client should retry shortly.
type ErrNotLeader struct {
	Leader, LeaderAddr string
	Reason             string
}

func (e *ErrNotLeader) Error() string {
	if e.Leader == "" {
		return "no leader (" + e.Reason + "): retry"
	}
	return "not the leader: " + e.Leader + " at " + e.LeaderAddr
}

// errOutcomeUnknown: the entry is in the leader's log but no quorum confirmed it in time. It
// may still be committed, or lost: the client must not assume either.
var errOutcomeUnknown = errors.New("no quorum in time: outcome unknown")

func (b *Broker) notServingLocked() error {
	if b.lead != nil && b.lead.ready {
		return nil
	}
	if b.lead != nil {
		return &ErrNotLeader{Reason: "leader not ready: bringing followers to its log"}
	}
	st := b.srv.Status()
	if st.LeaderID != "" && st.LeaderID != b.cfg.Election.SelfID {
		return &ErrNotLeader{Leader: st.LeaderID, LeaderAddr: b.cfg.Brokers[st.LeaderID]}
	}
	return &ErrNotLeader{Reason: "election in progress"}
}

// Append appends value as the leader and returns its index once a quorum has it durably.
func (b *Broker) Append(value string) (index, term int64, err error) {
	if value == "" {
		return 0, 0, errors.New("empty value")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.notServingLocked(); err != nil {
		return 0, 0, err
	}
	ld := b.lead
	if err := b.durableLocked("append", func() error { return b.l.Append(Entry{Term: ld.term, Value: value}) }); err != nil {
		return 0, 0, err
	}
	idx := b.l.Len() - 1
	if b.electionMovedPast(ld.term) { // this member may have voted for a leader without the entry
		b.stepDownLocked()
		return 0, 0, errOutcomeUnknown
	}
	b.advanceCommitLocked(ld) // a group of one
	b.wakeAllLocked(ld)
	b.waitLocked(time.Now().Add(b.cfg.AppendTimeout), func() bool { return b.lead != ld || ld.commit >= idx })
	if ld.commit >= idx {
		return idx, ld.term, nil
	}
	return 0, 0, errOutcomeUnknown
}

// Read returns the committed values in log order, as the leader of the current term.
func (b *Broker) Read() ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.notServingLocked(); err != nil {
		return nil, err
	}
	ld := b.lead
	ld.readSeq++
	seq, commit := ld.readSeq, ld.commit
	b.wakeAllLocked(ld)
	confirmed := func() bool {
		n := 1
		for _, f := range ld.peers {
			if f.ackedSeq >= seq {
				n++
			}
		}
		return n > (len(ld.peers)+1)/2
	}
	b.waitLocked(time.Now().Add(b.cfg.AppendTimeout), func() bool { return b.lead != ld || confirmed() })
	if b.lead != ld || !confirmed() || b.electionMovedPast(ld.term) {
		return nil, &ErrNotLeader{Reason: "leadership not confirmed by a quorum"}
	}
	vals := []string{}
	for i := int64(0); i <= commit; i++ {
		if v := b.l.At(i).Value; v != "" {
			vals = append(vals, v)
		}
	}
	return vals, nil
}

// ---- HTTP ----

// Handler serves the broker's HTTP API:
//
//	POST /append?value=V      200 {index, term}; 421 {leader, leaderAddr} on a follower;
//	                          503 {retryable: true} during an election or before the leader
//	                          is ready (nothing was appended); 504 when the outcome is unknown
//	GET  /log                 200 {values} from the ready leader (same refusals)
//	POST /transfer?to=ID      hand leadership over (the election member's TransferLeadership)
//	GET  /status              the election member's status and this log's end
//	POST /internal/append     replication (AppendRequest)
//	POST /debug/fault?drop=ID,ID&delay=D&stall=D&full=1   with Config.Faults only
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /append", func(w http.ResponseWriter, r *http.Request) {
		idx, term, err := b.Append(r.URL.Query().Get("value"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int64{"index": idx, "term": term})
	})
	mux.HandleFunc("GET /log", func(w http.ResponseWriter, r *http.Request) {
		vals, err := b.Read()
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string][]string{"values": vals})
	})
	mux.HandleFunc("POST /transfer", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), b.srv.TransferTimeout()+time.Second)
		defer cancel()
		if _, err := b.srv.TransferLeadership(ctx, r.URL.Query().Get("to")); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"leader": r.URL.Query().Get("to")})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st := b.srv.Status()
		b.mu.Lock()
		t, i := b.l.End()
		ready := b.lead != nil && b.lead.ready
		b.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"id": st.SelfID, "role": st.Role.String(), "term": st.Term,
			"leader": st.LeaderID, "ready": ready, "endTerm": t, "endIndex": i})
	})
	mux.HandleFunc("POST /internal/append", func(w http.ResponseWriter, r *http.Request) {
		var req AppendRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil || len(req.Entries) > maxBatch {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		resp, err := b.HandleAppend(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	if b.cfg.Faults {
		mux.HandleFunc("POST /debug/fault", func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			f := faults{drop: map[string]bool{}}
			for _, id := range strings.Split(q.Get("drop"), ",") {
				if id != "" {
					f.drop[id] = true
				}
			}
			for name, d := range map[string]*time.Duration{"delay": &f.delay, "stall": &f.stall} {
				if v := q.Get(name); v != "" {
					var err error
					if *d, err = time.ParseDuration(v); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
				}
			}
			f.full = q.Get("full") != ""
			b.mu.Lock()
			b.faults = f
			b.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
	}
	return mux
}

func writeErr(w http.ResponseWriter, err error) {
	var nl *ErrNotLeader
	switch {
	case errors.As(err, &nl) && nl.Leader != "":
		writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": err.Error(), "leader": nl.Leader, "leaderAddr": nl.LeaderAddr})
	case errors.As(err, &nl):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error(), "retryable": true})
	case errors.Is(err, errOutcomeUnknown):
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"error": err.Error(), "retryable": false})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
