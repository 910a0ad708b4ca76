package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/cellserver/cellserver/daemon"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// Series Prometheus makes itself, which no /metrics has.
var prometheusOwn = map[string]bool{"up": true}

// withPeers are the series a node exports once it has cluster
// replication streams, one per peer: a lone node has none, and
// metrics/cluster_test.go holds their names.
var withPeers = map[string]bool{"cellserver_cluster_replication_last_message_seconds": true, "cellserver_cluster_replication_lag_changes": true}

var (
	promqlString   = regexp.MustCompile(`"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'`)
	promqlBraces   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues    = regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`)
	promqlWords    = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "and": true, "or": true, "unless": true, "bool": true, "offset": true, "Inf": true, "NaN": true}
)

// metricNames returns the metric names a PromQL expression reads: its
// identifiers, less strings, label matchers, ranges, grouping label
// lists, keywords and functions (an identifier before "("). A Grafana
// label_values(metric, label) query reads its metric.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		return []string{m[1]}
	}
	e := promqlString.ReplaceAllString(expr, `""`)
	e = promqlBraces.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // a number's exponent or a duration's unit
		}
		if promqlWords[id] || strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " "), "(") {
			continue
		}
		out = append(out, id)
	}
	return out
}

// TestMetricNames checks metricNames on the expressions' shapes the
// dashboard and the rules use.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (command, outcome) (rate(cellserver_commands_total{instance=~"$instance"}[$__rate_interval]))`: {"cellserver_commands_total"},
		`histogram_quantile(0.99, sum by (le) (rate(go_sched_latencies_seconds_bucket[5m])))`:                  {"go_sched_latencies_seconds_bucket"},
		`(a_bytes / b_bytes > 0.9) and b_bytes > 0`:                                                            {"a_bytes", "b_bytes", "b_bytes"},
		`count by (job) (count_values by (job) ("members", m))`:                                                {"m"},
		`time() - last_seconds > 1e+09`:                                                                        {"last_seconds"},
		`label_values(cellserver_connected_clients, instance)`:                                                 {"cellserver_connected_clients"},
		`up{job="cellserver"} == 0`:                                                                            {"up"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// dashboardExprs returns every PromQL expression of the Grafana
// dashboard: the panels' targets and the template variables' queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("grafana/cellserver.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("grafana/cellserver.json: %v", err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" || key == "definition" || key == "query" && strings.Contains(v, "(") {
				out = append(out, v)
			}
		}
	}
	walk(doc, "")
	return out
}

// alertRules is the part of a Prometheus rules file the test reads.
type alertRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// alertExprs returns the rules' expressions, by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			out[rule.Alert] = rule.Expr
		}
	}
	return out
}

// scrape returns the metric names a running daemon's /metrics exposes,
// with a histogram's _bucket, _sum and _count series.
func scrape(t *testing.T, addr string) map[string]bool {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	testkit.Until(t, testkit.IOTimeout, "/metrics", func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = parser.TextToMetricFamilies(io.Reader(resp.Body))
		return err
	})
	names := map[string]bool{}
	for name, f := range fams {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		}
	}
	return names
}

// Every metric the Grafana dashboard and the alert rules read exists in
// the /metrics of a cellserver with persistence and cluster mode on (so
// that every series cellserver has is there), and promtool, where it is
// installed, finds the rules valid. A renamed metric fails here.
func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	port := testkit.FreePair(t, 10000)
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel = port, "warning"
	cfg.Dir, cfg.Save, cfg.SaveSet = t.TempDir(), "", true
	cfg.ClusterEnabled, cfg.ClusterSecret = true, "s"
	cfg.MaxMemory = 1 << 30
	cfg.MetricsAddr = "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	d, err := daemon.New(daemon.Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
		defer cancel()
		_ = d.Shutdown(ctx)
		testkit.Recv(t, errc, "Run to return")
	})
	testkit.Recv(t, d.Ready(), "the daemon to be ready")
	rc := testkit.Dial(t, "127.0.0.1:"+strconv.Itoa(port))
	if got := rc.Do("CL.THROTTLE", "k", "5", "1", "60"); !strings.HasPrefix(got, "*5") {
		t.Fatalf("CL.THROTTLE: %q", got) // a command called: its series appear
	}
	rc.WantDo("+OK\r\n", "SAVE") // a snapshot: the snapshot series hold figures
	have := scrape(t, cfg.MetricsAddr)

	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			if !have[n] && !prometheusOwn[n] && !withPeers[n] {
				t.Errorf("%s reads %s, which /metrics does not have (expr %q)", where, n, expr)
			}
		}
	}
	exprs := dashboardExprs(t)
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d expressions", len(exprs))
	}
	for _, e := range exprs {
		check("grafana/cellserver.json", e)
	}
	alerts := alertExprs(t)
	for _, want := range []string{"CellserverDown", "CellserverMemoryNearLimit", "CellserverSnapshotsFailing", "CellserverClusterSlotsNotServed", "CellserverReplicationLag",
		"CellserverClusterReplicaBehind", "CellserverClusterReplicationStalled"} {
		if alerts[want] == "" {
			t.Errorf("prometheus/alerts.yml has no alert %s", want)
		}
	}
	for name, e := range alerts {
		check("prometheus/alerts.yml "+name, e)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed (Debian's prometheus package has it): the rules' syntax was not checked")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "rules", "prometheus/alerts.yml").CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}
