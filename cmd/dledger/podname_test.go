package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestIDFromPodName(t *testing.T) {
	for _, c := range []struct{ name, id, err string }{
		{"dledger-0", "n0", ""},
		{"dledger-2", "n2", ""},
		{"dledger-17", "n17", ""},
		{"broker-a-dledger-3", "n3", ""}, // a StatefulSet name may contain '-' itself
		{"x-123456789", "n123456789", ""},
		{"dledger", "", "not a StatefulSet pod name"},
		{"dledger-", "", "not a StatefulSet pod name"},
		{"-2", "", "not a StatefulSet pod name"},
		{"", "", "not a StatefulSet pod name"},
		{"dledger-x", "", `"x" is not a number`},
		{"dledger-2a", "", `"2a" is not a number`},
		{"dledger-+2", "", "is not a number"},
		{"dledger-02", "", "leading zero"},
		{"dledger-1234567890", "", "too large"},
		{"dledger-0.dledger", "", "is not a number"},
	} {
		id, err := idFromPodName(c.name)
		switch {
		case c.err == "" && (err != nil || id != c.id):
			t.Errorf("idFromPodName(%q) = %q, %v; want %q", c.name, id, err, c.id)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("idFromPodName(%q) = %q, %v; want an error with %q", c.name, id, err, c.err)
		}
	}
}

// The pod name comes in through any layer (Kubernetes sets DLEDGER_ID_FROM_POD_NAME from the
// downward API), excludes --id, and a bad one stops the server with exit status 2 naming it.
func TestIDFromPodNameSetting(t *testing.T) {
	base := []string{"--peers", cfgPeers3, "--data-dir", filepath.Join(t.TempDir(), "data"), "--key-file", cfgKeyFile(t)}
	su := resolveOK(t, base, []string{"DLEDGER_ID_FROM_POD_NAME=dledger-2"})
	if su.cfg.SelfID != "n2" {
		t.Fatalf("self id %q from DLEDGER_ID_FROM_POD_NAME=dledger-2, want n2", su.cfg.SelfID)
	}
	for _, c := range []struct {
		name      string
		args, env []string
		want      string
	}{
		{"with --id", []string{"--id", "n1"}, []string{"DLEDGER_ID_FROM_POD_NAME=dledger-2"},
			"--id and DLEDGER_ID_FROM_POD_NAME exclude each other"},
		{"not a pod name", []string{"--id-from-pod-name", "dledger"}, nil,
			`--id-from-pod-name: "dledger" is not a StatefulSet pod name`},
		{"not a member", nil, []string{"DLEDGER_ID_FROM_POD_NAME=dledger-3"}, `self id "n3" is not in the peers list`},
		{"bad listen", []string{"--id", "n0", "--listen", "0.0.0.0"}, nil, `listen address "0.0.0.0" is not host:port`},
		{"listen port 0", []string{"--id", "n0", "--listen", "127.0.0.1:0"}, nil, `listen address "127.0.0.1:0": port "0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, code, ok := resolveServer(append(append([]string{}, base...), c.args...), c.env, &stderr)
			if ok || code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("ok %v, exit %d, stderr %q; want exit 2 with %q", ok, code, stderr.String(), c.want)
			}
		})
	}
}
