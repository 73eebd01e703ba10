package prom

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/antidote-kafka/antidote/consumer"
)

// exported returns the name of every metric family the package exports,
// with each hook fed once and a watched consumer with every kind of state.
func exported(t *testing.T) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	pe := consumer.PartitionEvent{Topic: "t"}
	m.RecordSettled(consumer.SettledEvent{PartitionEvent: pe, Outcome: consumer.OutcomeProcessed})
	m.RecordRetried(consumer.RetryEvent{PartitionEvent: pe})
	m.HandlerDone(consumer.HandlerEvent{PartitionEvent: pe})
	m.DeadLetterWritten(consumer.WriteEvent{PartitionEvent: pe})
	m.RecordAcquired(consumer.AcquiredEvent{PartitionEvent: pe, DeliveryCount: 1})
	m.RecordAcknowledged(consumer.AckEvent{PartitionEvent: pe, Ack: consumer.AckAccept})
	m.Watch(fixedStats{
		ShareGroup:   &consumer.ShareGroupState{Group: "g", DeliveryLimit: 5},
		Stuck:        []consumer.Stuck{{Topic: "t", Reason: consumer.StuckRetrying, Since: time.Now()}},
		Partitions:   []consumer.Partition{{Topic: "t", State: consumer.PartitionStuck, Paused: consumer.PauseStuck, Lag: 1}},
		Dependencies: map[string]string{"registry": "closed"},
		Topics:       []consumer.Topic{{Topic: "t", Partitions: 1}},
	})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	return names
}

// dashboardExprs returns the PromQL of every target of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("dashboards", "antidote.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("antidote.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("antidote.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || len(p.Targets) == 0 {
			t.Errorf("panel %q: id %d repeated or no targets", p.Title, p.ID)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: a target without expr", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

var metricName = regexp.MustCompile(`\bantidote_[a-z_]+`)

// TestDashboardAndRulesUseExportedMetrics: every metric the dashboard and
// the alert rules name is one the package exports (a histogram by its
// _bucket, _sum and _count series).
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	have := exported(t)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, line := range strings.Split(string(doc), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//")); strings.HasPrefix(line, "//\tantidote_") && len(f) > 0 {
			table = append(table, f[0])
		}
	}
	if len(have) != len(table) {
		t.Fatalf("exported %d families: %v; the metric table in doc.go lists %d: %v", len(have), have, len(table), table)
	}
	sources := map[string]string{"antidote.json": strings.Join(dashboardExprs(t), "\n")}
	for _, f := range []string{"alerts.yml", "alerts_test.yml"} {
		b, err := os.ReadFile(filepath.Join("dashboards", f))
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = string(b)
	}
	used := map[string]bool{}
	for file, text := range sources {
		names := metricName.FindAllString(text, -1)
		if len(names) == 0 {
			t.Errorf("%s names no metric", file)
		}
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && strings.HasSuffix(b, "_seconds") {
					base = b
				}
			}
			if !slices.Contains(have, base) {
				t.Errorf("%s names %s, which the package does not export", file, n)
			}
			used[base] = true
		}
	}
	for _, n := range have {
		if !used[n] {
			t.Logf("not on the dashboard nor in the rules: %s", n)
		}
	}
	// The doc's metric table lists every exported metric.
	for _, n := range have {
		if !regexp.MustCompile(`(?m)^//\s+` + n + `\s`).Match(doc) {
			t.Errorf("doc.go's metric table has no row for %s", n)
		}
	}
}

// promtool returns the promtool binary. Without it the test is skipped,
// unless CI=true, where the test command installs it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool not installed (scripts/test.sh installs it with CI=true: apt-get install prometheus)")
	}
	t.Skip("promtool not installed: alert rules not checked (apt-get install prometheus)")
	return ""
}

func runPromtool(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "dashboards"
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil {
		if errors.As(err, &exit) {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Fatal(err)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestAlertRulesPromtool: the alert rules pass promtool check rules and
// their unit tests (alerts_test.yml); the dashboard's queries parse as
// PromQL (checked as recording rules).
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	runPromtool(t, bin, "check", "rules", "alerts.yml")
	runPromtool(t, bin, "test", "rules", "alerts_test.yml")

	grafana := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$topic", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(grafana.Replace(e))
		rules.WriteString("      - record: antidote:dashboard_query_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "\n        expr: " + string(q) + "\n")
	}
	f := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, "check", "rules", f)
}
