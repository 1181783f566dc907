package prometheus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
)

const (
	rulesFile     = "cephdpdkd.rules.yml"
	rulesTestFile = "cephdpdkd.rules_test.yml"
	configFile    = "prometheus.yml"
	dashboardFile = "../grafana/cephdpdkd.json"
	repoRoot      = "../.."
)

// tools returns the paths of prometheus and promtool, skipping the test
// when either is missing (scripts/deps.sh installs Debian's prometheus).
func tools(t *testing.T) (prom, promtool string) {
	t.Helper()
	var err error
	if promtool, err = exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (scripts/deps.sh installs the prometheus package)")
	}
	if prom, err = exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus not installed (scripts/deps.sh installs the prometheus package)")
	}
	return prom, promtool
}

func TestPromtool(t *testing.T) {
	_, promtool := tools(t)
	for _, args := range [][]string{
		{"check", "config", configFile},
		{"check", "rules", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// decodeFile decodes file into v with unmarshal (yaml's or json's),
// failing t on any error.
func decodeFile(t *testing.T, file string, unmarshal func([]byte, any) error, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	decodeFile(t, rulesFile, yaml.Unmarshal, &f)
	var rs []rule
	for _, g := range f.Groups {
		rs = append(rs, g.Rules...)
	}
	if len(rs) == 0 {
		t.Fatal("no rules")
	}
	return rs
}

// dashboardExprs returns every query of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	decodeFile(t, dashboardFile, json.Unmarshal, &d)
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q has a target without expr", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("dashboard has %d queries", len(exprs))
	}
	return exprs
}

// grafanaVars replaces the dashboard's variables with what Grafana would
// send for "All" instances.
func grafanaVars(e string) string {
	return strings.NewReplacer("$__rate_interval", "10s", "$instance", ".*").Replace(e)
}

// Every rule carries what an operator needs, and the test file covers every
// alert both firing and not firing.
func TestRulesComplete(t *testing.T) {
	rs := loadRules(t)
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	decodeFile(t, rulesTestFile, yaml.Unmarshal, &tf)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range rs {
		if r.Alert == "" {
			continue
		}
		if r.For == "" {
			t.Errorf("%s: no for:", r.Alert)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || len(r.Annotations["description"]) < 80 {
			t.Errorf("%s: summary or description missing or too short", r.Alert)
		}
		if !firing[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: %s lacks a firing (%v) or a not-firing (%v) case", r.Alert, rulesTestFile, firing[r.Alert], quiet[r.Alert])
		}
	}
}

// collectorSources maps a metric-name prefix to the files whose descriptors
// append a suffix to it.
var collectorSources = []struct{ prefix, file string }{
	{"cephdpdkd_roce_bridge_", "internal/metrics/rocebridge.go"},
	{"cephdpdkd_roce_cm_", "internal/metrics/rocecm.go"},
	{"cephdpdkd_roce_app_", "internal/metrics/roceapp.go"},
	{"cephdpdkd_roce_ceph_", "internal/metrics/roceceph.go"},
	{"cephdpdkd_roce_", "internal/metrics/roce.go"},
	{"cephdpdkd_config_", "internal/metrics/reload.go"},
	{"cephdpdkd_xdp_", "internal/metrics/xdp.go"},
	{"cephdpdkd_", "internal/metrics/metrics.go"},
}

var metricName = regexp.MustCompile(`\bcephdpdkd_[a-z0-9_]+`)

// Every cephdpdkd_* name in the rules and the dashboard is one the daemon's
// collectors declare, so a renamed metric cannot leave an alert silently
// matching nothing.
func TestMetricNamesExist(t *testing.T) {
	src := map[string]string{}
	for _, c := range collectorSources {
		b, err := os.ReadFile(filepath.Join(repoRoot, c.file))
		if err != nil {
			t.Fatal(err)
		}
		src[c.file] = string(b)
	}
	declared := func(name string) bool {
		for _, c := range collectorSources {
			if !strings.HasPrefix(name, c.prefix) {
				continue
			}
			s := src[c.file]
			if strings.Contains(s, `"`+name+`"`) || strings.Contains(s, `"`+strings.TrimPrefix(name, c.prefix)+`"`) {
				return true
			}
		}
		return false
	}
	var text []string
	for _, r := range loadRules(t) {
		text = append(text, r.Expr)
	}
	text = append(text, dashboardExprs(t)...)
	seen := map[string]bool{}
	for _, e := range text {
		for _, n := range metricName.FindAllString(e, -1) {
			if !seen[n] {
				seen[n] = true
				if !declared(n) {
					t.Errorf("%s is not declared by any collector", n)
				}
			}
		}
	}
	if len(seen) < 20 {
		t.Errorf("only %d metric names found", len(seen))
	}
}

// proc is a child process with its output in a file, killed at cleanup.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func start(t *testing.T, ctx context.Context, logName string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{log: filepath.Join(t.TempDir(), logName), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits up to d, killing the process after that.
func (p *proc) stop(d time.Duration) (exited bool, err error) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		return false, p.err
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

func apiGet(ctx context.Context, base, path string, q url.Values) (*apiResponse, error) {
	u := base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	if r.Status != "success" {
		return &r, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return &r, nil
}

type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func query(ctx context.Context, base, expr string) (resultType string, vec []vectorSample, err error) {
	r, err := apiGet(ctx, base, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return "", nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return "", nil, err
	}
	if d.ResultType == "vector" {
		err = json.Unmarshal(d.Result, &vec)
	}
	return d.ResultType, vec, err
}

// A running daemon scraped by a real Prometheus that loads the alert rules:
// the port's packet rate shows up, every rule evaluates healthy, and every
// rule and dashboard query runs without error.
func TestLivePrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no live daemon")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK")
	}
	prom, _ := tools(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	bin := filepath.Join(dir, "cephdpdkd")
	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = daemonproc.Build(bctx, daemonproc.Package, bin)
	bcancel()
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	metricsAddr, promAddr := daemonproc.FreeAddr(t), daemonproc.FreeAddr(t)
	cfg, err := os.ReadFile(filepath.Join(root, "configs/cephdpdkd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y := string(cfg)
	prefix := fmt.Sprintf("cdd-promtest-%d", os.Getpid())
	// The EAL's runtime directory, removed after the daemon is gone (this
	// cleanup runs after the one that kills it).
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", prefix)) })
	for old, repl := range map[string]string{
		"listen: 127.0.0.1:9477":        "listen: " + metricsAddr,
		"file_prefix: cephdpdkd-sample": "file_prefix: " + prefix,
	} {
		if !strings.Contains(y, old) {
			t.Fatalf("configs/cephdpdkd.yaml lacks %q", old)
		}
		y = strings.Replace(y, old, repl, 1)
	}
	daemonCfg := filepath.Join(dir, "cephdpdkd.yaml")
	if err := os.WriteFile(daemonCfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon := start(t, ctx, "cephdpdkd.log", bin, "run", "--config", daemonCfg, "--status=off")

	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	pc := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: cephdpdkd
    static_configs:
      - targets: [%q]
        labels: {nic: sample}
`, rules, metricsAddr)
	if err := os.WriteFile(promCfg, []byte(pc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, ctx, "prometheus.log", prom,
		"--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr,
		"--log.level=warn")
	base := "http://" + promAddr

	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- cephdpdkd log:\n%s\n--- prometheus log:\n%s", append(args, daemon.output(), p.output())...)
	}

	// The port's receive rate, through Prometheus.
	var rate float64
	var lastErr error
	for rate <= 0 {
		select {
		case <-ctx.Done():
			fail("no positive rate(cephdpdkd_port_rx_packets_total[5s]) within the deadline (last error: %v)", lastErr)
		case <-daemon.done:
			fail("cephdpdkd exited early: %v", daemon.err)
		case <-p.done:
			fail("prometheus exited early: %v", p.err)
		case <-time.After(500 * time.Millisecond):
		}
		_, vec, err := query(ctx, base, `rate(cephdpdkd_port_rx_packets_total{job="cephdpdkd",nic="sample"}[5s])`)
		if lastErr = err; err != nil || len(vec) == 0 {
			continue
		}
		s, _ := vec[0].Value[1].(string)
		rate, _ = strconv.ParseFloat(s, 64)
	}
	t.Logf("rx rate through Prometheus: %.0f pps after %v", rate, time.Since(began).Round(time.Millisecond))

	// Every rule of the loaded group evaluated without error.
	var health map[string]string
	for {
		health = map[string]string{}
		r, rerr := apiGet(ctx, base, "/api/v1/rules", nil)
		lastErr = rerr
		if rerr == nil {
			var d struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			}
			json.Unmarshal(r.Data, &d)
			for _, g := range d.Groups {
				for _, r := range g.Rules {
					health[r.Name] = r.Health + " " + r.LastError
				}
			}
		}
		ok := len(health) == len(loadRules(t))
		for _, h := range health {
			ok = ok && strings.TrimSpace(h) == "ok"
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			fail("rules not all healthy: %v (last error %v)", health, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}

	// Every alert expression and dashboard query runs against the live data.
	var exprs []string
	for _, r := range loadRules(t) {
		exprs = append(exprs, r.Expr)
	}
	for _, e := range dashboardExprs(t) {
		exprs = append(exprs, grafanaVars(e))
	}
	nonEmpty := 0
	for _, e := range exprs {
		typ, vec, err := query(ctx, base, e)
		if err != nil {
			t.Errorf("query %q: %v", e, err)
			continue
		}
		if typ != "vector" {
			t.Errorf("query %q: result type %s, want vector", e, typ)
		}
		if len(vec) > 0 {
			nonEmpty++
		}
	}
	t.Logf("%d queries evaluated, %d with data", len(exprs), nonEmpty)

	// A healthy daemon raises no alert (some may be pending at most, for
	// want of history; none is firing).
	if r, err := apiGet(ctx, base, "/api/v1/alerts", nil); err != nil {
		t.Errorf("alerts: %v", err)
	} else {
		var d struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		json.Unmarshal(r.Data, &d)
		var names []string
		for _, a := range d.Alerts {
			names = append(names, a.Labels["alertname"]+"/"+a.State)
			if a.State == "firing" {
				t.Errorf("alert %v firing against a healthy daemon", a.Labels)
			}
		}
		sort.Strings(names)
		t.Logf("alerts: %v", names)
	}

	if exited, err := p.stop(10 * time.Second); !exited || err != nil {
		t.Errorf("prometheus: exited on SIGTERM %v, %v\n%s", exited, err, p.output())
	}
	exited, err := daemon.stop(20 * time.Second)
	logs := daemon.output()
	if !exited || err != nil {
		t.Errorf("cephdpdkd: exited on SIGTERM %v, %v\n%s", exited, err, logs)
	}
	if !strings.Contains(logs, "all mbufs returned") {
		t.Errorf("cephdpdkd log lacks \"all mbufs returned\":\n%s", logs)
	}
	t.Logf("live part took %v", time.Since(began).Round(time.Millisecond))
}

// docs/operator/monitoring.md's count of alerts is the rules file's.
func TestMonitoringAlertCount(t *testing.T) {
	alerts := 0
	for _, r := range loadRules(t) {
		if r.Alert != "" {
			alerts++
		}
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operator", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cephdpdkd\.rules\.yml` + "`" + `, whose (\d+) alerts`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/operator/monitoring.md does not say how many alerts cephdpdkd.rules.yml has")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != alerts {
		t.Errorf("docs/operator/monitoring.md says %d alerts; cephdpdkd.rules.yml has %d", n, alerts)
	}
}
