package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dledger-go/dledger/dledger/dledgertest"
	"github.com/dledger-go/dledger/server"
	"github.com/dledger-go/dledger/server/daemon"
	"github.com/dledger-go/dledger/server/tlsfiles"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

// TestPrometheusScrapesOverTLS runs the shipped scrape configuration (scripts/monitoring/
// prometheus.yml) in the real Prometheus against a member whose --metrics listener serves
// HTTPS: with the members' CA the target is up; with another CA's file it is down for the
// certificate, so the configuration does verify it. Only the targets, the CA path and the
// scrape interval are changed; skipped where Prometheus is not installed.
func TestPrometheusScrapesOverTLS(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian: apt-get install --no-install-recommends prometheus), " +
			"so scripts/monitoring/prometheus.yml is not run against a member")
	}
	shipped, err := os.ReadFile("../../scripts/monitoring/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "members")
	pair := ca.Server(t, "n0")
	store, err := tlsfiles.Load(tlsfiles.Files{Cert: pair.CertFile, Key: pair.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", TLS: store, ClientCertAuth: true},
		daemon.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Group: "g", SelfID: "n0", Peers: dledgertest.PeersString(dledgertest.FreePorts(t, 1)),
		DataDir: t.TempDir(), Insecure: true, Ledger: server.LedgerNone}, server.WithAttacher(d.Attacher()), server.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	d.Serve()
	t.Cleanup(func() { s.Stop(context.Background()); d.Stop(context.Background()) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}

	render := func(caFile string) string {
		t.Helper()
		cfg := string(shipped)
		for _, r := range []struct{ re, with string }{
			{`(?m)^(\s*ca_file:) /etc/prometheus/dledger-ca\.pem$`, "${1} " + caFile},
			{`(?m)^(\s*scrape_interval:) 15s\b.*$`, "${1} 1s"},
			{`(?m)^rule_files:\n(\s+- .*\n)+`, ""},
			{`(?m)^(\s*- targets:)\n(\s+- 10\.0\.0\.1\d:22911\n)+`, "${1} ['" + d.MetricsAddr() + "']\n"},
		} {
			re := regexp.MustCompile(r.re)
			if !re.MatchString(cfg) {
				t.Fatalf("scripts/monitoring/prometheus.yml: nothing matches %q", r.re)
			}
			cfg = re.ReplaceAllString(cfg, r.with)
		}
		return cfg
	}
	// scrape runs Prometheus on cfg until the target's health and last error satisfy want (a
	// scrape of a busy machine may time out first: the next one counts), or fails the test.
	scrape := func(name, cfg string, want func(health, lastError string) bool) {
		t.Helper()
		dir := t.TempDir()
		path := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		web := fmt.Sprintf("127.0.0.1:%d", dledgertest.FreePorts(t, 1)[0])
		cmd := exec.Command(bin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
		logPath := filepath.Join(dir, "prometheus.log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				b, _ := os.ReadFile(logPath)
				t.Logf("%s: prometheus's output:\n%s\nconfiguration:\n%s", name, b, cfg)
			}
		}()
		var h, lastErr string
		defer func() {
			if t.Failed() {
				t.Logf("%s: last health %q, last error %q", name, h, lastErr)
			}
		}()
		dledgertest.Eventually(t, 30*time.Second, name+": the target's expected health", func() bool {
			resp, err := http.Get("http://" + web + "/api/v1/targets")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var body struct {
				Data struct {
					ActiveTargets []struct {
						Health, LastError string
					}
				}
			}
			if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data.ActiveTargets) != 1 {
				return false
			}
			h, lastErr = body.Data.ActiveTargets[0].Health, body.Data.ActiveTargets[0].LastError
			return want(h, lastErr)
		})
	}
	scrape("members' CA", render(ca.File), func(h, _ string) bool { return h == "up" })
	scrape("another CA", render(tlstest.NewCA(t, "other").File), func(h, e string) bool {
		if h == "up" {
			t.Fatalf("with another CA's file the target is up")
		}
		return h == "down" && strings.Contains(e, "x509: certificate signed by unknown authority")
	})
}
