package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// The process's seams. The HTTP admin API, watch streams, member discovery and hooks are the
// `dledger server` process's, in package server/daemon; this package knows nothing of HTTP.
// What the daemon needs from a member is here, and nothing else of the member is open to it:
// the member's full status and its ready gate (FullStatus, ServesAsLeader, Config), what the
// member tells its peers of itself in METADATA answers (Attachment.Advertise), what its peers tell
// of themselves (PeerMetadata), and a hook run when the member is built and awaited when it
// stops (WithAttacher). A Host gives its attachers to every member it adds (NewHost's opts),
// so one daemon serves every group of a process (docs/design.md, "The admin surface").

// Attacher is what a process adds to each member: Attach is called by New (and so by
// Host.AddGroup) last, once the member is built and before it starts, and may Subscribe to
// its role events; if it fails, New fails and releases the member. DetachTimeout is what the
// attachment's Detach may take at Stop; StopTimeout includes it.
type Attacher interface {
	Attach(s *Server) (Attachment, error)
	DetachTimeout() time.Duration
}

// Attachment is what an Attacher gives a member.
type Attachment struct {
	// Advertise, if set, returns the admin API's and the read-only listener's addresses the
	// member tells its peers in its METADATA answers ("" for none), so a tool that reaches one
	// member finds the others (PeerMetadata). It is called for every answer: it must be quick
	// and never block.
	Advertise func() (admin, read string)
	// Detach, if set, is called by Stop after the member's last event was published (final:
	// that event, {Role: UNKNOWN}, or nil for a member that never started) and awaited within
	// Stop's ctx.
	Detach func(ctx context.Context, final *dledger.RoleEvent)
}

// WithAttacher adds a to the member (see Attacher). Given to NewHost, it is added to every
// member of the host.
func WithAttacher(a Attacher) Option {
	return func(o *options) { o.attachers = append(o.attachers, a) }
}

// attach runs the attachers in order; on an error it detaches those already attached.
func (s *Server) attach(as []Attacher) error {
	for _, a := range as {
		at, err := a.Attach(s)
		if err != nil {
			s.detach(context.Background(), nil)
			return err
		}
		if at.Detach != nil {
			s.detachers = append(s.detachers, at.Detach)
		}
		if at.Advertise != nil {
			s.advertise = at.Advertise // the last one's: one process serves one admin API
		}
		s.detachTimeout += a.DetachTimeout()
	}
	return nil
}

// detach calls the detach functions, the last attached first.
func (s *Server) detach(ctx context.Context, final *dledger.RoleEvent) {
	for i := len(s.detachers) - 1; i >= 0; i-- {
		s.detachers[i](ctx, final)
	}
	s.detachers = nil
}

// FullStatus is Status with the elector's internals an operator reads in the admin API (the
// vote, the last vote round's result, the highest term heard of, the peers string). After a
// started member stopped it reports the final event's role (UNKNOWN), as Status does.
func (s *Server) FullStatus() dledger.Status { return s.fullStatus() }

// SelfAddr is the member's own address in its member list, as FullStatus's Peers names it
// ("" if none), without building a FullStatus.
func (s *Server) SelfAddr() string { return s.elector.SelfAddr() }

// ServesAsLeader is the leader health check on st (a FullStatus snapshot): st leads and, with
// Config.LeaderReadyGate, SetLeaderReady opened that term's leadership.
func (s *Server) ServesAsLeader(st dledger.Status) bool { return s.servesAsLeader(st) }

// Config is the member's resolved Config: the one New was given, with the profile's values in
// the zero Election fields (and, on a host, the host's keys and data dir).
func (s *Server) Config() Config {
	c := *s.cfg.Config
	c.Group, c.SelfID, c.DataDir = s.cfg.Group, s.cfg.SelfID, s.cfg.DataDir
	return c
}

// PeerMetadata is one member of the group as it answered this member's METADATA request.
type PeerMetadata struct {
	ID, Addr string // from the peers string
	Self     bool   // this member (its own advertised addresses; never asked)
	// Answered: the peer answered (Err says if the answer was no good); false: ctx ended first.
	Answered bool
	Err      error
	// AdminAddr and ReadAddr are what the peer advertised, unchecked: they came from the
	// network.
	AdminAddr, ReadAddr string
}

// PeerMetadata asks every other member for its METADATA (in parallel, over this member's
// authenticated rpc connections, until ctx ends) and returns every member in the peers
// string's order, this one included.
func (s *Server) PeerMetadata(ctx context.Context) []PeerMetadata {
	type answer struct {
		i    int
		resp *protocol.MetadataResponse
		err  error
	}
	peers := s.currentPeers()
	out := make([]PeerMetadata, len(peers))
	answers := make(chan answer, len(peers)) // a late callback never blocks
	asked := 0
	for i, p := range peers {
		out[i] = PeerMetadata{ID: p.ID, Addr: p.Addr}
		if p.ID == s.cfg.SelfID {
			out[i].Self, out[i].Answered = true, true
			out[i].AdminAddr, out[i].ReadAddr = s.advertised()
			continue
		}
		req := &protocol.MetadataRequest{Header: protocol.Header{Group: s.cfg.Group, RemoteID: p.ID, LocalID: s.cfg.SelfID}}
		s.client.SendMetadata(p.ID, req, func(r *protocol.MetadataResponse, err error) { answers <- answer{i, r, err} })
		asked++
	}
	for ; asked > 0; asked-- {
		var a answer
		select {
		case a = <-answers:
		case <-ctx.Done():
			return out
		}
		m := &out[a.i]
		m.Answered = true
		switch {
		case a.err != nil:
			m.Err = a.err
		case a.resp.Code != protocol.CodeSuccess:
			m.Err = errors.New("answered " + a.resp.Code.String())
		case a.resp.LocalID != m.ID:
			m.Err = fmt.Errorf("answered as %q", a.resp.LocalID)
		default:
			m.AdminAddr, m.ReadAddr = a.resp.AdminAddr, a.resp.ReadAddr
		}
	}
	return out
}

// advertised is what this member tells its peers of its admin addresses.
func (s *Server) advertised() (admin, read string) {
	if s.advertise == nil {
		return "", ""
	}
	return s.advertise()
}
