package main

import (
	"strings"
	"testing"
)

// `dledger members` refuses a usage error with exit 2 and one line naming the flag, before it
// asks anything: forced recovery in particular needs its explicit --yes-i-lost-the-quorum.
func TestMembersUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage: dledger members"},
		{[]string{"rename"}, "unknown subcommand"},
		{[]string{"list"}, "--http is required"},
		{[]string{"list", "--http", "127.0.0.1:1", "-o", "yaml"}, "want text or json"},
		{[]string{"add", "--http", "127.0.0.1:1", "--id", "n3"}, "--addr is required"},
		{[]string{"add", "--http", "127.0.0.1:1", "--id", "n3", "--addr", "127.0.0.1:2", "--public-key", "AAAA"}, "--public-key: not a base64-encoded 32-byte public key"},
		{[]string{"promote", "--http", "127.0.0.1:1"}, "--id is required"},
		{[]string{"remove", "--id", "n2"}, "--http is required"},
		{[]string{"remove", "--http", "127.0.0.1:1", "--id", "n2", "--member", "n0"}, "--member needs --group"},
		{[]string{"force-recover", "--http", "127.0.0.1:1"}, "--survivors is required"},
		{[]string{"force-recover", "--http", "127.0.0.1:1", "--survivors", "n0"}, "--yes-i-lost-the-quorum"},
		{[]string{"remove", "--http", "127.0.0.1:1", "--id", "n2", "--token-file", "/nonexistent/token"}, "--token-file"},
	} {
		code, out, errb := members(c.args...)
		if code != 2 || !strings.Contains(out+errb, c.want) {
			t.Errorf("members %v: exit %d, want 2 with %q\nstdout: %s\nstderr: %s", c.args, code, c.want, out, errb)
		}
	}
	// A member that cannot be reached: nothing was asked, exit 1.
	if code, _, errb := members("remove", "--http", "127.0.0.1:1", "--id", "n2", "--timeout", "1s"); code != 1 || errb == "" {
		t.Fatalf("an unreachable member: exit %d: %s", code, errb)
	}
}
