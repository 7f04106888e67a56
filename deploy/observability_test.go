package deploy_test

// Checks of the monitoring files: prometheus/alerts.yml must hold the alert
// thresholds, every alert in it needs a firing case in the promtool unit
// tests (prometheus/alerts_test.yml, run by `make lint` and, when promtool is
// on PATH, by TestPromtoolTestsRules), and the rules, their tests and
// grafana/seckill-dashboard.json may only name metrics the code registers, so
// renaming a metric breaks this test.

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	alertsPath     = "prometheus/alerts.yml"
	alertTestsPath = "prometheus/alerts_test.yml"
	dashboardPath  = "grafana/seckill-dashboard.json"
)

// plannedMetrics are named by alerts.yml and the dashboard before the code
// registers them. Remove a name from here once the code has it. (Both
// seckill_order_consume_oldest_age_seconds and
// seckill_message_quarantined_total started here; the saga starter registers
// them now.)
var plannedMetrics = []string{}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type rulesFile struct {
	Groups []struct {
		Name  string      `yaml:"name"`
		Rules []alertRule `yaml:"rules"`
	} `yaml:"groups"`
}

func loadAlerts(t *testing.T) (rulesFile, []byte) {
	t.Helper()
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var f rulesFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s does not parse as a Prometheus rules file: %v", alertsPath, err)
	}
	return f, raw
}

var durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

func TestAlertRulesAreWellFormed(t *testing.T) {
	f, _ := loadAlerts(t)
	if len(f.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	seen := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("group name %q empty or repeated", g.Name)
		}
		groups[g.Name] = true
		if len(g.Rules) == 0 {
			t.Errorf("group %s has no rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: rule without alert name (record %q)", g.Name, r.Record)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: no expr", r.Alert)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: unbalanced parentheses in expr", r.Alert)
			}
			// Every rule states for:, "0s" where the first evaluation fires.
			if !durationRE.MatchString(r.For) {
				t.Errorf("%s: for %q is missing or not a Prometheus duration", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, k := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: annotation %s missing", r.Alert, k)
				}
			}
			if rb := r.Annotations["runbook"]; !regexp.MustCompile(`^docs/operations\.md#[a-z0-9-]+$`).MatchString(rb) {
				t.Errorf("%s: runbook %q does not point at docs/operations.md#<anchor>", r.Alert, rb)
			}
		}
	}
}

// TestAlertRulesCoverSeedThresholds checks each §12.3 threshold by the alert
// that implements it: its severity, the metric it reads and the threshold or
// window that makes it that alert.
func TestAlertRulesCoverSeedThresholds(t *testing.T) {
	f, _ := loadAlerts(t)
	byName := map[string]alertRule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			byName[r.Alert] = r
		}
	}
	want := []struct {
		alert, severity, metric string
		exprHas                 []string
		forIs                   string
	}{
		// 最老待发送 reservation: > 3 s / > 15 s
		{"SeckillReservationSendLagWarning", "warning", "seckill_reservation_send_oldest_age_seconds", []string{"> 3"}, ""},
		{"SeckillReservationSendLagCritical", "critical", "seckill_reservation_send_oldest_age_seconds", []string{"> 15"}, ""},
		// 最老 Outbox: > 5 s / > 30 s
		{"SeckillOutboxLagWarning", "warning", "seckill_outbox_oldest_age_seconds", []string{"> 5"}, ""},
		{"SeckillOutboxLagCritical", "critical", "seckill_outbox_oldest_age_seconds", []string{"> 30"}, ""},
		// MQ 最老订单消息: > 3 s / > 30 s
		{"SeckillOrderConsumeLagWarning", "warning", "seckill_order_consume_oldest_age_seconds", []string{"> 3"}, ""},
		{"SeckillOrderConsumeLagCritical", "critical", "seckill_order_consume_oldest_age_seconds", []string{"> 30"}, ""},
		// Commit Unknown: > 0 within 1 min / sustained 5 min or fast growth
		{"SeckillDBCommitUnknown", "warning", "seckill_db_commit_unknown_total", []string{"[1m]", "> 0"}, ""},
		{"SeckillDBCommitUnknownSustained", "critical", "seckill_db_commit_unknown_total", []string{"[1m]", "> 0"}, "5m"},
		{"SeckillDBCommitUnknownBurst", "critical", "seckill_db_commit_unknown_total", []string{"[5m]"}, ""},
		// Redis reservation 缺失补偿: any / several in 5 min
		{"SeckillRedisReservationMissing", "warning", "seckill_compensation_total", []string{`result="redis_missing"`, "> 0"}, ""},
		{"SeckillRedisReservationMissingBurst", "critical", "seckill_compensation_total", []string{`result="redis_missing"`, "[5m]"}, ""},
		// Inbox Payload 冲突: any is critical
		{"SeckillInboxPayloadConflict", "critical", "seckill_inbox_payload_conflict_total", []string{"> 0"}, ""},
		// 库存守恒偏差: one round / two consecutive rounds (round = 5m)
		{"SeckillInventoryDeltaWarning", "warning", "seckill_inventory_pg_invariant_delta", []string{"seckill_inventory_redis_invariant_delta", "seckill_inventory_cross_system_delta", "> 0"}, ""},
		{"SeckillInventoryDeltaCritical", "critical", "seckill_inventory_pg_invariant_delta", []string{"seckill_inventory_redis_invariant_delta", "seckill_inventory_cross_system_delta", "> 0"}, "6m"},
		// 支付后取消冲突: any
		{"SeckillPaymentAfterCancel", "warning", "seckill_payment_total", []string{`result="paid_after_cancel"`, "> 0"}, ""},
		// DLQ 新增: any / growing (our quarantine is the DLQ)
		{"SeckillMessageQuarantined", "warning", "seckill_order_consume_total", []string{`result="quarantined"`, "seckill_message_quarantined_total", "> 0"}, ""},
		{"SeckillMessageQuarantineGrowing", "critical", "seckill_order_consume_total", []string{`result="quarantined"`, "seckill_message_quarantined_total"}, "15m"},
		// Beyond §12.3.
		{"SeckillReservationSendMissing", "warning", "seckill_reservation_send_missing_total", []string{"> 0"}, ""},
		{"SeckillReservationUnsettledPastDeadline", "warning", "seckill_reservation_send_recheck_total", []string{"> 0"}, ""},
		{"SeckillOutboxManual", "warning", "seckill_outbox_send_total", []string{`result="manual"`, "> 0"}, ""},
		{"SeckillReconcilerNotRunning", "warning", "seckill_reconcile_run_duration_seconds_count", []string{"[15m]", "== 0"}, ""},
		{"SeckillCompensationPendingOld", "warning", "seckill_compensation_oldest_age_seconds", nil, ""},
		{"SeckillReconcilePaidButCompensated", "critical", "seckill_reconcile_manual_total", []string{`type="PAID_BUT_REDIS_COMPENSATED"`}, ""},
	}
	for _, w := range want {
		r, ok := byName[w.alert]
		if !ok {
			t.Errorf("alert %s missing", w.alert)
			continue
		}
		if r.Labels["severity"] != w.severity {
			t.Errorf("%s: severity %q, want %s", w.alert, r.Labels["severity"], w.severity)
		}
		for _, s := range append([]string{w.metric}, w.exprHas...) {
			if !strings.Contains(r.Expr, s) {
				t.Errorf("%s: expr does not contain %q:\n%s", w.alert, s, r.Expr)
			}
		}
		if w.forIs != "" && r.For != w.forIs {
			t.Errorf("%s: for %q, want %s", w.alert, r.For, w.forIs)
		}
	}
}

// knownMetrics scans the module's Go source (tests excluded) for the names
// given to Prometheus collectors and adds plannedMetrics.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	nameRE := regexp.MustCompile(`Name:\s*"(seckill_[a-z0-9_]+)"`)
	known := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "vendor" || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range nameRE.FindAllSubmatch(src, -1) {
			known[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(known) < 20 {
		t.Fatalf("found only %d seckill_ metric names in the source; the scan is broken", len(known))
	}
	for _, p := range plannedMetrics {
		if known[p] {
			t.Logf("planned metric %s is now registered by the code; drop it from plannedMetrics", p)
		}
		known[p] = true
	}
	return known
}

var seckillMetricRE = regexp.MustCompile(`seckill_[a-z0-9_]+`)

// unknownNames returns the seckill_ metric names in text that are not known,
// after stripping the series suffixes of histograms.
func unknownNames(text string, known map[string]bool) []string {
	var bad []string
	for _, name := range seckillMetricRE.FindAllString(text, -1) {
		if known[name] {
			continue
		}
		base := name
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			base = strings.TrimSuffix(base, suf)
		}
		if !known[base] && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	return bad
}

// monitoringFiles returns alerts.yml, its promtool tests (their input series
// must be real metric names, or the tests prove nothing) and the dashboard.
func monitoringFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, p := range []string{alertsPath, alertTestsPath, dashboardPath} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(raw)
	}
	return files
}

func TestMonitoringNamesOnlyRegisteredMetrics(t *testing.T) {
	known := knownMetrics(t)
	for file, text := range monitoringFiles(t) {
		if n := len(seckillMetricRE.FindAllString(text, -1)); n == 0 {
			t.Errorf("%s names no seckill_ metric", file)
		}
		for _, name := range unknownNames(text, known) {
			t.Errorf("%s names %s, which no Go source registers (and is not planned)", file, name)
		}
	}
}

// temporalSDKMetrics reads the Temporal SDK's metric names from its source in
// the module cache and returns the names they get on Prometheus through
// temporalx.MetricsHandler: counters with _total, timers (…_latency) with
// _seconds, gauges as they are.
func temporalSDKMetrics(t *testing.T) map[string]bool {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to locate the Temporal SDK source")
	}
	cmd := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk")
	cmd.Dir = ".."
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("cannot locate the Temporal SDK source: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "internal", "common", "metrics", "constants.go"))
	if err != nil {
		t.Skipf("Temporal SDK metric names not found: %v", err)
	}
	consts := map[string]string{}
	prefixRE := regexp.MustCompile(`(\w+)\s*=\s*"(temporal_)"`)
	for _, m := range prefixRE.FindAllStringSubmatch(string(src), -1) {
		consts[m[1]] = m[2]
	}
	defRE := regexp.MustCompile(`(\w+)\s*=\s*(\w+)\s*\+\s*"([a-z_]+)"`)
	defs := defRE.FindAllStringSubmatch(string(src), -1)
	for range 3 { // definitions refer to earlier ones (TemporalRequest + "_failure")
		for _, m := range defs {
			if base, ok := consts[m[2]]; ok {
				consts[m[1]] = base + m[3]
			}
		}
	}
	names := map[string]bool{}
	for _, v := range consts {
		if v == "temporal_" {
			continue
		}
		if strings.HasSuffix(v, "_latency") {
			names[v+"_seconds"] = true
		} else {
			names[v] = true
			names[v+"_total"] = true
		}
	}
	if !names["temporal_workflow_task_schedule_to_start_latency_seconds"] {
		t.Fatalf("Temporal SDK constants.go did not parse as expected (%d names)", len(names))
	}
	return names
}

func TestMonitoringTemporalNamesExistInSDK(t *testing.T) {
	names := temporalSDKMetrics(t)
	re := regexp.MustCompile(`temporal_[a-z0-9_]+`)
	for file, text := range monitoringFiles(t) {
		for _, name := range re.FindAllString(text, -1) {
			base := name
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suf)
			}
			if !names[base] {
				t.Errorf("%s names %s, which the Temporal SDK does not export through temporalx.MetricsHandler", file, name)
			}
		}
	}
}

func TestPromtoolChecksRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH; skipping `promtool check rules` (the structure checks above still ran)")
	}
	out, err := exec.Command(promtool, "check", "rules", alertsPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func TestPromtoolTestsRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH; skipping `promtool test rules` (TestEveryAlertHasPromtoolTest still ran)")
	}
	out, err := exec.Command(promtool, "test", "rules", alertTestsPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// promtoolTests is the part of a promtool rule test file this test reads.
type promtoolTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTests []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertHasPromtoolTest fails when an alert of alerts.yml has no
// promtool case that makes it fire, so a new alert needs a test in
// alerts_test.yml; and when a case names an alert alerts.yml lacks (promtool
// passes a "must not fire" case of a renamed alert without a word).
func TestEveryAlertHasPromtoolTest(t *testing.T) {
	f, _ := loadAlerts(t)
	raw, err := os.ReadFile(alertTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	var pt promtoolTests
	if err := yaml.Unmarshal(raw, &pt); err != nil {
		t.Fatalf("%s: %v", alertTestsPath, err)
	}
	if !slices.Contains(pt.RuleFiles, filepath.Base(alertsPath)) {
		t.Errorf("%s: rule_files %v does not load %s", alertTestsPath, pt.RuleFiles, filepath.Base(alertsPath))
	}
	rules := map[string]alertRule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = r
			}
		}
	}
	fires := map[string]int{}
	for i, tc := range pt.Tests {
		if len(tc.InputSeries) == 0 {
			t.Errorf("%s: test %d has no input_series", alertTestsPath, i)
		}
		for _, c := range tc.AlertRuleTests {
			r, ok := rules[c.Alertname]
			if !ok {
				t.Errorf("%s: test %d checks alert %q, which %s does not define", alertTestsPath, i, c.Alertname, alertsPath)
				continue
			}
			for _, e := range c.ExpAlerts {
				if e.ExpLabels["severity"] != r.Labels["severity"] {
					t.Errorf("%s: %s at %s expects severity %q, the rule has %q", alertTestsPath, c.Alertname, c.EvalTime, e.ExpLabels["severity"], r.Labels["severity"])
				}
			}
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			}
		}
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && fires[r.Alert] == 0 {
				t.Errorf("alert %s has no promtool test in %s that makes it fire (an alert_rule_test with exp_alerts)", r.Alert, alertTestsPath)
			}
		}
	}
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func TestDashboardIsWellFormed(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title         string      `json:"title"`
		UID           string      `json:"uid"`
		SchemaVersion int         `json:"schemaVersion"`
		Panels        []dashPanel `json:"panels"`
		Templating    struct {
			List []struct {
				Name, Type string
				Query      any
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard needs a title and a uid")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want >= 36", d.SchemaVersion)
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct {
		Name, Type string
		Query      any
	}) bool {
		return v.Name == "DS_PROMETHEUS" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		t.Error("no datasource variable DS_PROMETHEUS of type prometheus")
	}

	var all []dashPanel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...) // panels of collapsed rows
	}
	ids := map[int]bool{}
	var rows []string
	graphs := 0
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("panel id %d repeated", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos", p.Title)
		}
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		graphs++
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if !strings.Contains(string(p.Datasource), "${DS_PROMETHEUS}") {
			t.Errorf("panel %q: datasource %s, want ${DS_PROMETHEUS}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: target without expr or refId", p.Title)
			}
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %s", p.Title, tg.Expr)
			}
			if len(tg.Datasource) > 0 && !strings.Contains(string(tg.Datasource), "${DS_PROMETHEUS}") {
				t.Errorf("panel %q: target datasource %s", p.Title, tg.Datasource)
			}
		}
	}
	if graphs < 20 {
		t.Errorf("only %d panels", graphs)
	}
	for _, want := range []string{"Admission", "Redis → MQ", "MQ → saga", "Orders", "Outbox", "Reconciliation", "Temporal"} {
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("no row about %q (rows: %v)", want, rows)
		}
	}
}
