package adminclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxSSELine bounds one line of the stream (an event's JSON is about 200 bytes).
const maxSSELine = 64 << 10

// ErrIdle: the stream sent nothing, not even a keepalive, for WatchOptions.Idle. The member
// sends a keepalive every 15 s, so this finds a member whose host vanished without closing
// the connection.
var ErrIdle = errors.New("nothing received (not even a keepalive)")

// ErrStreamEnded: the member ended the stream (it stopped, or this client fell behind and
// should resume after its last event).
var ErrStreamEnded = errors.New("the member ended the stream (it stopped, or this client fell behind)")

// WatchOptions says where a stream starts and when it is taken for dead.
type WatchOptions struct {
	// LastEventID resumes after that event (a previous Event.ID); "" starts from the latest.
	LastEventID string
	// Idle ends the stream with ErrIdle when nothing arrives for that long; 0: never.
	Idle time.Duration
}

// Event is one event of the watch stream: a role event (Missed nil) or the notice that the
// events after Missed.Since are gone (Role zero), which the current state follows.
type Event struct {
	ID     string // the stream's id: line, for WatchOptions.LastEventID ("" on a missed notice)
	Data   string // the event's JSON as the member sent it
	Role   EventJSON
	Missed *MissedJSON
}

// Stream is an open GET /v1/watch. Close it when done.
type Stream struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *time.Timer
	idleD  time.Duration
}

// Watch opens the member's role-event stream (GET /v1/watch, Server-Sent Events). An answer
// other than 200 is an *HTTPError (a 4xx: the address is not a member's watch API, and
// retrying will not change that).
func (c *Client) Watch(ctx context.Context, o WatchOptions) (*Stream, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/watch", nil)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if o.LastEventID != "" {
		req.Header.Set("Last-Event-ID", o.LastEventID)
	}
	resp, err := c.do(req)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel(nil)
		return nil, httpError(resp.StatusCode, raw)
	}
	s := &Stream{body: resp.Body, sc: bufio.NewScanner(resp.Body), ctx: ctx, cancel: cancel, idleD: o.Idle}
	s.sc.Buffer(make([]byte, 4096), maxSSELine)
	if o.Idle > 0 {
		s.idle = time.AfterFunc(o.Idle, func() { cancel(ErrIdle) })
	}
	return s, nil
}

// Close ends the stream.
func (s *Stream) Close() error {
	if s.idle != nil {
		s.idle.Stop()
	}
	s.cancel(nil)
	return s.body.Close()
}

// Next is the stream's next event, skipping keepalives and kinds of event this client does not
// know. An event whose JSON does not decode is an error (the stream stays usable). The
// stream's end is ErrStreamEnded, ErrIdle, or the transport's error.
func (s *Stream) Next() (Event, error) {
	var id, kind string
	var data strings.Builder
	for s.sc.Scan() {
		if s.idle != nil {
			s.idle.Reset(s.idleD)
		}
		line := s.sc.Text()
		if line == "" { // the end of an event
			if data.Len() > 0 && (kind == "" || kind == "message" || kind == "missed") {
				return decodeEvent(id, kind, data.String())
			}
			id, kind = "", ""
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") { // a keepalive comment
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "event":
			kind = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	if errors.Is(context.Cause(s.ctx), ErrIdle) {
		return Event{}, fmt.Errorf("%w for %v", ErrIdle, s.idleD)
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, ErrStreamEnded
}

func decodeEvent(id, kind, data string) (Event, error) {
	ev := Event{ID: id, Data: data}
	if kind == "missed" {
		ev.Missed = &MissedJSON{}
		if err := json.Unmarshal([]byte(data), ev.Missed); err != nil {
			return Event{}, &BadEventError{Kind: kind, Data: data, Err: err}
		}
		return ev, nil
	}
	if err := json.Unmarshal([]byte(data), &ev.Role); err != nil {
		return Event{}, &BadEventError{Kind: kind, Data: data, Err: err}
	}
	return ev, nil
}

// BadEventError is an event whose JSON did not decode; the stream goes on.
type BadEventError struct {
	Kind, Data string
	Err        error
}

func (e *BadEventError) Error() string {
	what := "event"
	if e.Kind == "missed" {
		what = "missed event"
	}
	return fmt.Sprintf("bad %s %q: %v", what, e.Data, e.Err)
}
