package sim

import (
	"fmt"
	"io"
	"time"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TailSize is how many trace lines a violation report shows.
const TailSize = 30

type recKind uint8

const (
	rSend     recKind = iota // a request leaves its sender
	rDeliver                 // a request reached its destination and was handled
	rDrop                    // a request was lost (note says why)
	rRespDrop                // a response was lost (note says why)
	rResp                    // a response reached its sender: done(resp, nil)
	rTimeout                 // done(nil, timeout)
	rDiscard                 // the sender crashed since: its callback is discarded
	rRole                    // a role event taken from an elector
	rCrash                   // a member crashed
	rRestart                 // a member restarted (term and vote as loaded)
	rCut                     // a directed link was cut
	rPhase                   // a fault or heal phase began (note: the parameters)
	rAppend                  // a leader appended to its ledger
	rCopy                    // a follower copied its leader's ledger end
	rStore                   // a member's vote store started or stopped failing
	rStable                  // a heal phase found a stable leader
	rNote                    // anything else worth a line
)

type msgKind uint8

const (
	mVote msgKind = iota
	mHeartBeat
	mTransfer
)

var msgNames = [...]string{"VOTE", "HEARTBEAT", "TRANSFER"}

// record is one trace line, kept unformatted: formatting every event would dominate the cost
// of a run, and only the tail of a failing run (or --trace) is ever printed.
type record struct {
	at   time.Duration
	kind recKind
	msg  msgKind
	a, b int8 // members, -1 for none
	term int64
	x, y int64
	call uint64
	note string
}

// tracer hashes every record, keeps the last TailSize, and writes them all to out if set.
type tracer struct {
	hash  uint64
	ring  [TailSize]record
	next  int
	count int
	out   io.Writer
	ids   []string
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func newTracer(out io.Writer, ids []string) *tracer {
	return &tracer{hash: fnvOffset, out: out, ids: ids}
}

func (t *tracer) mix(v uint64) { t.hash = (t.hash ^ v) * fnvPrime }

func (t *tracer) add(r record) {
	t.mix(uint64(r.at))
	t.mix(uint64(r.kind)<<24 | uint64(r.msg)<<16 | uint64(uint8(r.a))<<8 | uint64(uint8(r.b)))
	t.mix(uint64(r.term))
	t.mix(uint64(r.x))
	t.mix(uint64(r.y))
	t.mix(r.call)
	for i := 0; i < len(r.note); i++ {
		t.mix(uint64(r.note[i]))
	}
	t.ring[t.next] = r
	t.next = (t.next + 1) % TailSize
	t.count++
	if t.out != nil {
		fmt.Fprintln(t.out, t.format(r))
	}
}

// tail returns the last records, formatted, oldest first.
func (t *tracer) tail() []string {
	n := min(t.count, TailSize)
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, t.format(t.ring[(t.next-n+i+TailSize)%TailSize]))
	}
	return out
}

func (t *tracer) id(i int8) string {
	if i < 0 || int(i) >= len(t.ids) {
		return "-"
	}
	return t.ids[i]
}

func (t *tracer) format(r record) string {
	ts := fmt.Sprintf("%11.6fs", r.at.Seconds())
	if r.kind <= rDiscard {
		return t.formatMessage(ts, r)
	}
	switch r.kind {
	case rRole:
		return fmt.Sprintf("%s ROLE     %s term=%d %v leader=%s", ts, t.id(r.a), r.term, protocol.Role(r.x), t.id(int8(r.y)))
	case rCrash:
		return fmt.Sprintf("%s CRASH    %s (term=%d)", ts, t.id(r.a), r.term)
	case rRestart:
		return fmt.Sprintf("%s RESTART  %s term=%d voteFor=%s ledger=(%d,%d)", ts, t.id(r.a), r.term, r.note, r.x, r.y)
	case rCut:
		return fmt.Sprintf("%s CUT      %s->%s", ts, t.id(r.a), t.id(r.b))
	case rPhase:
		return fmt.Sprintf("%s PHASE    %s", ts, r.note)
	case rAppend:
		return fmt.Sprintf("%s append   %s ledger=(%d,%d)", ts, t.id(r.a), r.term, r.x)
	case rCopy:
		return fmt.Sprintf("%s copy     %s<-%s ledger=(%d,%d)", ts, t.id(r.a), t.id(r.b), r.term, r.x)
	case rStore:
		return fmt.Sprintf("%s STORE    %s %s", ts, t.id(r.a), r.note)
	case rStable:
		return fmt.Sprintf("%s STABLE   leader %s term=%d after %v", ts, t.id(r.a), r.term, time.Duration(r.x))
	}
	return fmt.Sprintf("%s note     %s", ts, r.note)
}

// formatMessage formats the records of one call (rSend .. rDiscard).
func (t *tracer) formatMessage(ts string, r record) string {
	m := msgNames[r.msg]
	switch r.kind {
	case rSend:
		if r.msg == mVote {
			return fmt.Sprintf("%s send     #%d %s %s->%s term=%d ledger=(%d,%d)", ts, r.call, m, t.id(r.a), t.id(r.b), r.term, r.x, r.y)
		}
		return fmt.Sprintf("%s send     #%d %s %s->%s term=%d", ts, r.call, m, t.id(r.a), t.id(r.b), r.term)
	case rDeliver:
		var result fmt.Stringer = protocol.ResponseCode(r.x)
		if r.msg == mVote {
			result = protocol.VoteResult(r.x)
		}
		return fmt.Sprintf("%s handle   #%d %s %s->%s term=%d => %v respTerm=%d", ts, r.call, m, t.id(r.a), t.id(r.b), r.term,
			result, r.y)
	case rDrop:
		return fmt.Sprintf("%s drop     #%d %s %s->%s (%s)", ts, r.call, m, t.id(r.a), t.id(r.b), r.note)
	case rRespDrop:
		return fmt.Sprintf("%s dropresp #%d %s %s->%s (%s)", ts, r.call, m, t.id(r.a), t.id(r.b), r.note)
	case rResp:
		return fmt.Sprintf("%s response #%d %s %s->%s", ts, r.call, m, t.id(r.a), t.id(r.b))
	case rTimeout:
		return fmt.Sprintf("%s timeout  #%d %s to %s, at %s", ts, r.call, m, t.id(r.b), t.id(r.a))
	}
	return fmt.Sprintf("%s discard  #%d %s: %s restarted since the send", ts, r.call, m, t.id(r.a))
}
