package harness

import (
	"reflect"
	"testing"
)

// TestInNamespace: a member in a namespace runs through `ip netns exec`, serves the poller on
// its read-only listener at the namespace's address and keeps its admin API on loopback.
func TestInNamespace(t *testing.T) {
	m := &Member{NS: "dlc1n0"}
	got := inNamespace(m, []string{"/bin/dledger", "server", "--id", "n0", "--http", "10.214.3.1:4000", "--profile", "lan"})
	want := []string{"ip", "netns", "exec", "dlc1n0", "/bin/dledger", "server", "--id", "n0",
		"--http", "127.0.0.1:4000", "--metrics", "10.214.3.1:4000", "--insecure-network-trusted", "--profile", "lan"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
