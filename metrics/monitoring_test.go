package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// The monitoring kit (scripts/monitoring) is data, not Go, so it is checked here, next to the
// collector it must agree with: every metric it names must exist, every alert must have unit
// tests that show it firing and not firing, and promtool, when installed, must accept it all.

const monitoringDir = "../scripts/monitoring"

var (
	alertsFile     = filepath.Join(monitoringDir, "dledger-alerts.yml")
	alertTestsFile = filepath.Join(monitoringDir, "dledger-alerts_test.yml")
	dashboardFile  = filepath.Join(monitoringDir, "dledger-dashboard.json")
)

// metricRef finds metric names in PromQL and in the prose around it.
var metricRef = regexp.MustCompile(`dledger_[a-z_]+`)

// exportedSeriesNames is every series name a member exports, a histogram's _bucket, _sum and
// _count included, as New registers them and the server declares their series.
func exportedSeriesNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, "g", "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.DeclarePeers([]string{"n1"})
	m.DeclareRPCReasons([]string{"oversize"}, []string{"VOTE"}, []string{"timeout"})
	m.DeclareAuthReasons([]string{"bad_key"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suffix] = true
			}
		}
	}
	return names
}

// checkNames fails for every dledger_* name in text that the collector does not export.
func checkNames(t *testing.T, where, text string, exported map[string]bool) {
	t.Helper()
	reported := map[string]bool{}
	for _, name := range metricRef.FindAllString(text, -1) {
		if !exported[name] && !reported[name] {
			reported[name] = true
			t.Errorf("%s uses %s, which the collector does not export", where, name)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert       string
			Expr        string
			For         string
			Labels      map[string]string
			Annotations map[string]string
		}
	}
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string
		AlertRuleTest []struct {
			Alertname string
			ExpAlerts []any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	}
}

// readYAML decodes path into v; strict: a field v does not declare is an error.
func readYAML(t *testing.T, path string, v any, strict bool) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// TestAlertRulesUseExportedMetrics: every alert names only metrics the collector exports (in
// its expression and its annotations), has a severity and a summary, and its unit tests (whose
// input series must be exported metrics as well) show it both firing and not firing. Runs
// without promtool.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	exported := exportedSeriesNames(t)
	var rules ruleFile
	readYAML(t, alertsFile, &rules, true)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name (recording rules belong elsewhere)", g.Name)
				continue
			}
			alerts = append(alerts, r.Alert)
			if !metricRef.MatchString(r.Expr) {
				t.Errorf("%s: expression %q uses no dledger metric", r.Alert, r.Expr)
			}
			checkNames(t, r.Alert+" expr", r.Expr, exported)
			for k, v := range r.Annotations {
				checkNames(t, r.Alert+" "+k, v, exported)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
		}
	}
	// What issue 17 asks the rules to cover.
	for _, want := range []string{"DLedgerNoLeader", "DLedgerMultipleLeaders", "DLedgerTwoLeadersInOneTerm",
		"DLedgerLeaderFlapping", "DLedgerLeaderlessTime", "DLedgerHostileFrames", "DLedgerAuthFailures",
		// and issue 33: a member down, fewer members than configured (the leaderless one above
		// is the member that cannot reach a quorum).
		"DLedgerMemberDown", "DLedgerFewerMembersThanConfigured"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s missing from %s", want, alertsFile)
		}
	}

	var tests ruleTests
	// The unit tests' input series must be real metrics too, or they test nothing.
	checkNames(t, alertTestsFile, readYAML(t, alertTestsFile, &tests, false), exported)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Errorf("%s tests rule files %v, want [%s]", alertTestsFile, tests.RuleFiles, filepath.Base(alertsFile))
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if !slices.Contains(alerts, at.Alertname) {
				t.Errorf("test %q checks alert %s, which the rules do not define", tc.Name, at.Alertname)
			}
			if len(at.ExpAlerts) > 0 {
				firing[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !firing[a] || !quiet[a] {
			t.Errorf("alert %s: unit tests show it firing: %v, not firing: %v; want both", a, firing[a], quiet[a])
		}
	}
}

// byClause finds the grouping of every aggregation in a PromQL expression; wholeAggregation
// an aggregation over every series (no grouping).
var (
	byClause         = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)
	wholeAggregation = regexp.MustCompile(`\b(sum|max|min|count|avg)\s*\(`)
)

// countsEachMemberOnce says why expr could count a member twice when two jobs scrape it
// (its --metrics listener and its admin address: two instances, the same self_id), or "":
// the expression must aggregate, and keep neither instance nor job in any grouping.
func countsEachMemberOnce(expr string) string {
	ms := byClause.FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 && !wholeAggregation.MatchString(expr) {
		return "it does not aggregate, so it keeps every scrape job's series"
	}
	for _, m := range ms {
		if m[1] == "without" {
			return "it aggregates without(...), which keeps instance and job"
		}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l == "instance" || l == "job" {
				return fmt.Sprintf("it groups by %s", l)
			}
		}
	}
	return ""
}

// TestMonitoringCountsEachMemberOnce: every alert and every dashboard query counts a member
// once, however many jobs scrape it; before, member alerts fired once per job and per-member
// panels drew every line twice. The promtool unit tests show it for alerts with two jobs.
func TestMonitoringCountsEachMemberOnce(t *testing.T) {
	var rules ruleFile
	readYAML(t, alertsFile, &rules, true)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if why := countsEachMemberOnce(r.Expr); why != "" {
				t.Errorf("alert %s: %s: %q", r.Alert, why, r.Expr)
			}
		}
	}
	_, panels := readDashboard(t)
	for _, p := range panels {
		for _, tg := range p.Targets {
			if why := countsEachMemberOnce(tg.Expr); why != "" {
				t.Errorf("panel %q: %s: %q", p.Title, why, tg.Expr)
			}
		}
	}
	// The check itself can fail.
	for _, bad := range []string{"dledger_term", "sum by (self_id, instance) (dledger_term)", "sum without (le) (x)"} {
		if countsEachMemberOnce(bad) == "" {
			t.Errorf("countsEachMemberOnce passes %q", bad)
		}
	}
}

type dashboard struct {
	Title      string
	UID        string
	Templating struct {
		List []struct{ Name, Type string }
	}
	Panels []dashPanel
}

type dashPanel struct {
	ID      int
	Type    string
	Title   string
	Targets []struct{ Expr string }
	Panels  []dashPanel // a collapsed row's panels
}

func readDashboard(t *testing.T) (dashboard, []dashPanel) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	var panels []dashPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	return d, panels
}

// TestDashboardUsesExportedMetrics: the dashboard is valid JSON, templated on group and
// instance; every panel but a row queries dledger metrics the collector exports, confined to
// the selected group; and it shows what issue 17 asks for. Runs without promtool.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	exported := exportedSeriesNames(t)
	d, panels := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard needs a title and a uid (title %q, uid %q)", d.Title, d.UID)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["group"] != "query" || vars["instance"] != "query" || vars["datasource"] != "datasource" {
		t.Errorf("template variables %v, want datasource, and group and instance queries", vars)
	}
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricRef.MatchString(tg.Expr) {
				t.Errorf("panel %q: query %q uses no dledger metric", p.Title, tg.Expr)
			}
			if !strings.Contains(tg.Expr, `group="$group"`) {
				t.Errorf("panel %q: query %q is not confined to the selected group", p.Title, tg.Expr)
			}
			checkNames(t, "panel "+p.Title, tg.Expr, exported)
			for _, n := range metricRef.FindAllString(tg.Expr, -1) {
				used[n] = true
			}
		}
	}
	for _, want := range []string{"dledger_is_leader", "dledger_has_leader", "dledger_term", "dledger_elections_total",
		"dledger_leader_changes_total", "dledger_vote_store_fsync_seconds_bucket", "dledger_peer_rtt_seconds_bucket",
		"dledger_auth_failures_total", "dledger_rpc_bad_frames_total"} {
		if !used[want] {
			t.Errorf("no dashboard panel shows %s", want)
		}
	}
}

// TestMonitoringKitWithPromtool runs promtool over the kit: the rules check and their unit
// tests, and a syntax check of every dashboard query (Grafana's variables replaced by values).
// CI installs promtool (Debian's prometheus package); elsewhere the test skips without it.
func TestMonitoringKitWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (Debian: apt-get install --no-install-recommends prometheus); " +
			"the rules' unit tests are not run. The metric name checks above still ran.")
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(monitoringDir, "check", "rules", filepath.Base(alertsFile))
	run(monitoringDir, "test", "rules", filepath.Base(alertTestsFile))

	checkScrapeConfig(t, run)

	// The dashboard's queries as recording rules, so promtool parses each one.
	_, panels := readDashboard(t)
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$group", "g", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range panels {
		for i, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d_query%d", p.ID, i), Expr: grafana.Replace(tg.Expr)})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-queries.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	run(dir, "check", "rules", "dashboard-queries.yml")
}

// checkScrapeConfig runs promtool over scripts/monitoring/prometheus.yml as it is installed: a
// file at the CA path it names and the rules beside it. (cmd/dledger's
// TestPrometheusScrapesOverTLS runs it in the real Prometheus.)
func checkScrapeConfig(t *testing.T, run func(dir string, args ...string)) {
	t.Helper()
	scrape, err := os.ReadFile(filepath.Join(monitoringDir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const shippedCA = "/etc/prometheus/dledger-ca.pem"
	if !strings.Contains(string(scrape), "ca_file: "+shippedCA+"\n") {
		t.Fatalf("prometheus.yml does not name the CA file %s", shippedCA)
	}
	rules, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"dledger-ca.pem": []byte("ca"), filepath.Base(alertsFile): rules,
		"prometheus.yml": []byte(strings.ReplaceAll(string(scrape), shippedCA, filepath.Join(dir, "dledger-ca.pem")))} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(dir, "check", "config", "prometheus.yml")
}
