package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
)

// docs/operations.md's promise: exit status 2 for a usage error, 1 for a runtime error, and one line on
// stderr saying what is wrong. A usage error also leaves no data dir behind.
func TestServerExitCodesAndOneLineErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := dledgertest.FreePorts(t, 2)
	peer := func(id string, port int) string { return fmt.Sprintf("%s-127.0.0.1:%d", id, port) }
	ok1 := peer("n0", free[0]) + ";" + peer("n1", free[1])
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, memberstate.StateFileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile := writeGroupKey(t, t.TempDir())
	looseKey := writeGroupKey(t, t.TempDir())
	if err := os.Chmod(looseKey, 0o644); err != nil {
		t.Fatal(err)
	}
	notAKey := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(notAKey, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		code int
		args []string // after: server --data-dir DIR --key-file KEY (DIR fresh unless given again)
		want string   // in the stderr line
	}{
		{"no key", 2, []string{"--id", "n0", "--peers", ok1, "--key-file", ""}, "--key-file is required"},
		{"key and insecure", 2, []string{"--id", "n0", "--peers", ok1, "--insecure-no-peer-auth"}, "exclude"},
		{"key file missing", 2, []string{"--id", "n0", "--peers", ok1, "--key-file", keyFile + ".missing"}, "no such file"},
		{"key file open to others", 2, []string{"--id", "n0", "--peers", ok1, "--key-file", looseKey}, "chmod 600"},
		{"not a key file", 2, []string{"--id", "n0", "--peers", ok1, "--key-file", notAKey}, "line 1"},
		{"unknown flag", 2, []string{"--id", "n0", "--peers", ok1, "--bogus"}, "bogus"},
		{"no id", 2, []string{"--peers", ok1}, "--id"},
		{"no peers", 2, []string{"--id", "n0"}, "--peers"},
		{"stray argument", 2, []string{"--id", "n0", "--peers", ok1, "extra"}, "extra"},
		{"bad peers", 2, []string{"--id", "n0", "--peers", "n0-127.0.0.1"}, "host:port"},
		{"duplicate id", 2, []string{"--id", "n0", "--peers", peer("n0", free[0]) + ";" + peer("n0", free[1])}, "n0"},
		{"self not a peer", 2, []string{"--id", "n7", "--peers", ok1}, "n7"},
		{"bad self id", 2, []string{"--id", "n;7", "--peers", ok1}, "n;7"},
		{"bad group", 2, []string{"--id", "n0", "--peers", ok1, "--group", "a b"}, "group"},
		{"bad preferred id", 2, []string{"--id", "n0", "--peers", ok1, "--preferred-leader-ids", "a-b"}, "preferred"},
		{"preferred not a peer", 2, []string{"--id", "n0", "--peers", ok1, "--preferred-leader-ids", "n8"}, "n8"},
		{"bad timings", 2, []string{"--id", "n0", "--peers", ok1, "--min-vote-interval", "500", "--max-vote-interval", "400"}, "minVoteInterval"},
		{"bad duration", 2, []string{"--id", "n0", "--peers", ok1, "--heartbeat-interval", "soon"}, "heartbeat-interval"},
		{"bad leak", 2, []string{"--id", "n0", "--peers", ok1, "--max-heartbeat-leak", "x"}, "max-heartbeat-leak"},
		{"unknown profile", 2, []string{"--id", "n0", "--peers", ok1, "--profile", "wan"}, `unknown profile "wan" (known: lan, dledger, fast)`},
		{"bad log level", 2, []string{"--id", "n0", "--peers", ok1, "--log-level", "loud"}, "log-level"},
		{"bad log format", 2, []string{"--id", "n0", "--peers", ok1, "--log-format", "xml"}, "log-format"},
		{"rpc port leaves no default http", 2, []string{"--id", "n0", "--peers", "n0-127.0.0.1:64600;n1-127.0.0.1:64601"}, "--http"},
		{"bad http", 2, []string{"--id", "n0", "--peers", ok1, "--http", "localhost"}, "--http"},
		{"rpc port in use", 1, []string{"--id", "n0", "--peers", "n0-" + busy.Addr().String() + ";" + peer("n1", free[1]), "--http", "off"}, "address already in use"},
		{"http port in use", 1, []string{"--id", "n0", "--peers", ok1, "--http", busy.Addr().String()}, "address already in use"},
		{"data dir not a dir", 1, []string{"--id", "n0", "--peers", ok1, "--http", "off", "--data-dir", filepath.Join(notADir, "d")}, "data dir"},
		{"corrupt vote.state", 1, []string{"--id", "n0", "--peers", ok1, "--http", "off", "--data-dir", corrupt}, "corrupt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"server", "--data-dir", dir, "--key-file", keyFile}, c.args...), &stdout, &stderr)
			line := stderr.String()
			if code != c.code || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !strings.Contains(line, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line mentioning %q", code, line, c.code, c.want)
			}
			if c.code == 2 {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a usage error created the data dir (%v)", err)
				}
			}
		})
	}
}

func TestDevUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"--members", "9"}, {"--base-port", "65000"}, {"--preferred-leader-ids", "n5"},
		{"--profile", "wan"}, {"--log-level", "loud"}, {"--bogus"}, {"--http-base-port", "32101"}, {"--http-base-port", "65534"}} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"dev", "--base-port", "32100"}, args...), &stdout, &stderr); code != 2 ||
			strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("dev %v: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
}

// The timing flags' real defaults come from --profile; flag's "(default 0s)" was a lie.
func TestServerHelpShowsTheProfileDefaults(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"server", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("server -h: exit %d", code)
	}
	help := stderr.String()
	if strings.Contains(help, "(default 0s)") || strings.Contains(help, "(default 0)") {
		t.Fatalf("help shows a zero default:\n%s", help)
	}
	for _, want := range []string{"lan 200ms, dledger 2s, fast 75ms", "lan 3, dledger 3, fast 8", "lan 100ms, dledger 300ms, fast 100ms",
		"lan 1000, dledger 1000, fast 1000", "or fast (lan with a 75 ms heartbeat"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
}

// A second signal during a slow stop (a hand-over can take seconds) exits at once.
func TestSecondSignalAbandonsTheStop(t *testing.T) {
	sig := make(chan os.Signal, 2)
	release := make(chan struct{})
	defer close(release)
	var stderr bytes.Buffer
	result := make(chan int, 1)
	go func() {
		result <- stopOnSignal(sig, zap.NewNop(), &stderr, "server", func() error {
			<-release // a hand-over that does not finish
			return nil
		})
	}()
	sig <- syscall.SIGTERM
	select {
	case code := <-result:
		t.Fatalf("returned %d before the stop finished or a second signal came", code)
	case <-time.After(100 * time.Millisecond):
	}
	sig <- syscall.SIGINT
	select {
	case code := <-result:
		if code != 130 || !strings.Contains(stderr.String(), "abandoned") || strings.Count(stderr.String(), "\n") != 1 {
			t.Fatalf("exit %d, stderr %q; want 130 and a line saying the hand-over was abandoned", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not end the stop")
	}
	// One signal and a stop that finishes: exit 0, or 1 with the stop's error.
	for _, c := range []struct {
		err  error
		code int
	}{{nil, 0}, {errors.New("rpc server: boom"), 1}} {
		sig <- syscall.SIGTERM
		stderr.Reset()
		if code := stopOnSignal(sig, zap.NewNop(), &stderr, "server", func() error { return c.err }); code != c.code {
			t.Fatalf("stop error %v: exit %d, want %d (%q)", c.err, code, c.code, stderr.String())
		}
	}
}

// keygen writes a key a member can load, mode 600, and never overwrites one; --rotate writes
// the three files of a rotation, each a valid key file with the keys in the step's order.
func TestKeygen(t *testing.T) {
	// A missing parent dir (data/ in a fresh checkout, as the README's walk-through starts) is
	// created, private.
	nested := filepath.Join(t.TempDir(), "data", "group.key")
	var out0, err0 bytes.Buffer
	if code := run([]string{"keygen", nested}, &out0, &err0); code != 0 {
		t.Fatalf("keygen into a missing dir: exit %d, %s", code, err0.String())
	}
	if fi, err := os.Stat(filepath.Dir(nested)); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Fatalf("the created parent dir has mode %v, want 700", fi.Mode().Perm())
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "group.key")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keygen", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("keygen: exit %d, %s", code, stderr.String())
	}
	ks, err := secure.LoadKeyFile(path)
	if err != nil || ks.Len() != 1 {
		t.Fatalf("load: %v (%d keys)", err, ks.Len())
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	stderr.Reset()
	if code := run([]string{"keygen", path}, &stdout, &stderr); code != 1 || strings.Count(stderr.String(), "already exists") != 1 {
		t.Fatalf("second keygen on the same file: exit %d, %q (want \"already exists\" said once)", code, stderr.String())
	}
	if again, _ := secure.LoadKeyFile(path); again.Primary() != ks.Primary() {
		t.Fatal("the key file was overwritten")
	}
	for _, args := range [][]string{{"keygen"}, {"keygen", "a", "b"}, {"keygen", "a", "--rotate", "b"},
		{"keygen", "--bogus", path}, {"keygen", path, "--bogus"}} {
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}

	// The flag may also follow the file, as people type it.
	if code := run([]string{"keygen", path, "--rotate"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keygen FILE --rotate: exit %d, %s", code, stderr.String())
	}
	old := ks.Primary()
	var steps []secure.KeySet
	for i := 1; i <= 3; i++ {
		s, err := secure.LoadKeyFile(fmt.Sprintf("%s.step%d", path, i))
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
	}
	nk := steps[2].Primary()
	if k := steps[0].Keys(); len(k) != 2 || k[0] != old || k[1] != nk {
		t.Error("step 1 must be the current key, then the new one")
	}
	if k := steps[1].Keys(); len(k) != 2 || k[0] != nk || k[1] != old {
		t.Error("step 2 must be the new key, then the current one")
	}
	if steps[2].Len() != 1 || nk == old {
		t.Error("step 3 must be a new key alone")
	}
	stderr.Reset()
	if code := run([]string{"keygen", "--rotate", path}, &stdout, &stderr); code != 1 || strings.Count(stderr.String(), "already exists") != 1 {
		t.Fatalf("rotate over existing step files: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"keygen", "--rotate", path + ".step1"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "2 keys") {
		t.Fatalf("rotate from a file mid-rotation: exit %d, %q", code, stderr.String())
	}
}
