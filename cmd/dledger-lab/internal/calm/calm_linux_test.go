package calm

import (
	"reflect"
	"strings"
	"testing"
)

// A shortened /proc/net/tcp: a listener, an established connection, one in TIME_WAIT.
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:5A0F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4711 1 0000000000000000 100 0 0 10 0
   1: 0100007F:BB6A 0100007F:5A0F 01 00000000:00000000 00:00000000 00000000     0        0 4712 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:BB6B 0100007F:5A0F 06 00000000:00000000 03:00000F3A 00000000     0        0 0 3 0000000000000000
`

func TestParseProcNetTCP(t *testing.T) {
	got, err := parseProcNetTCP(strings.NewReader(procNetTCP))
	if err != nil {
		t.Fatal(err)
	}
	want := []tcpConn{
		{inode: 4711, lport: 0x5A0F, rport: 0, established: false},
		{inode: 4712, lport: 0xBB6A, rport: 0x5A0F, established: true},
		{inode: 0, lport: 0xBB6B, rport: 0x5A0F, established: false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if _, err := parseProcNetTCP(strings.NewReader("hdr\n 0: 0100007F:ZZ 0100007F:5A0F 01 a b c 0 0 1\n")); err == nil {
		t.Fatal("a bad port was accepted")
	}
}

// TestSSKillArgs: one ss call destroys exactly the listed sockets, each named by its local and
// remote port.
func TestSSKillArgs(t *testing.T) {
	got := strings.Join(ssKillArgs([]tcpConn{{lport: 1, rport: 2}, {lport: 3, rport: 4}}), " ")
	want := "-K -t -n state established ( sport = :1 and dport = :2 ) or ( sport = :3 and dport = :4 )"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
