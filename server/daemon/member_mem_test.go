package daemon

import (
	"testing"
	"unsafe"

	"github.com/dledger-go/dledger/rpc/protocol"
)

// TestMemberRoutesMadeWhenAsked: a daemon's record of a member keeps no routes and no
// discovery gate until a request for the member arrives (most of a host's thousands of
// members are never asked for by path; issue 29), then answers from the ones it made, and
// keeps them; the record fits the 96-byte allocation class (its own address is read from the
// member when an advertised address needs it).
func TestMemberRoutesMadeWhenAsked(t *testing.T) {
	if n := unsafe.Sizeof(member{}); n > 96 {
		t.Fatalf("a daemon member record is %d bytes, past the 96-byte allocation class", n)
	}
	s := mustMember(t, soloConfig(t), Config{HTTPAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRole(t, s.Server, protocol.LEADER)
	m := s.d.member("g", "n0")
	if m == nil {
		t.Fatal("the daemon has no record of g/n0")
	}
	if m.web.Load() != nil {
		t.Fatal("the member's routes were made before any request")
	}
	if code, body := get(t, "http://"+s.HTTPAddr()+"/v1/status"); code != 200 {
		t.Fatalf("GET /v1/status: %d %s", code, body)
	}
	w := m.web.Load()
	if w == nil {
		t.Fatal("no routes after a request for the member")
	}
	if code, body := get(t, "http://"+s.HTTPAddr()+"/v1/members"); code != 200 {
		t.Fatalf("GET /v1/members: %d %s", code, body)
	}
	if m.web.Load() != w {
		t.Fatal("a second request made the member's routes again")
	}
}
