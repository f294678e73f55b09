package server

import (
	"context"
	"testing"
	"time"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/rpc/protocol"
)

// advertiser attaches an Advertise that names fixed addresses, and records its Detach.
type advertiser struct {
	admin, read string
	final       chan *dledger.RoleEvent
}

func (a *advertiser) Attach(s *Server) (Attachment, error) {
	return Attachment{Advertise: func() (string, string) { return a.admin, a.read },
		Detach: func(_ context.Context, final *dledger.RoleEvent) { a.final <- final }}, nil
}

func (a *advertiser) DetachTimeout() time.Duration { return 7 * time.Second }

// The attachment's addresses are in the member's METADATA answers for its group, and another
// group learns nothing; PeerMetadata's own entry names them; StopTimeout budgets the detach,
// which Stop calls with the final event.
func TestAttachmentAdvertisesAndDetachesAtStop(t *testing.T) {
	a := &advertiser{admin: "n0.svc:21911", read: "n0.svc:22911", final: make(chan *dledger.RoleEvent, 1)}
	s, err := New(soloConfig(t), WithAttacher(a))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(soloConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop(context.Background())
	if d := s.StopTimeout() - plain.StopTimeout(); d != 7*time.Second {
		t.Fatalf("StopTimeout budgets %v for the detach, want 7s", d)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ask := func(group string) *protocol.MetadataResponse {
		return s.rpcHandler().HandleMetadata(&protocol.MetadataRequest{Header: protocol.Header{Group: group, RemoteID: "n0", LocalID: "tool"}})
	}
	if got := ask("g"); got.AdminAddr != a.admin || got.ReadAddr != a.read {
		t.Fatalf("METADATA of group g: %+v", got)
	}
	if got := ask("other"); got.AdminAddr != "" || got.ReadAddr != "" || got.Code != protocol.CodeUnknownGroup {
		t.Fatalf("another group was told %+v", got)
	}
	if ps := s.PeerMetadata(context.Background()); len(ps) != 1 || !ps[0].Self || ps[0].AdminAddr != a.admin || ps[0].ReadAddr != a.read {
		t.Fatalf("PeerMetadata %+v", ps)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case final := <-a.final:
		if final == nil || final.Role != protocol.UNKNOWN || final.Group != "g" {
			t.Fatalf("Detach got final %+v, want the UNKNOWN event of group g", final)
		}
	default:
		t.Fatal("Stop returned without calling Detach")
	}
}
