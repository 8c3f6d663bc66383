// Package dashboards holds the Prometheus scrape config and the Grafana
// provisioning that docker compose mounts (profile "dashboards"); its test
// runs Debian's prometheus with that config against the local fleet.
package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"

	"inventory/internal/client"
	"inventory/internal/fleet"
	"inventory/internal/localstack"

	"inventory/internal/testenv"
)

// dashboard is the part of inventory.json the test reads.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("grafana/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana/inventory.json: %v", err)
	}
	return d
}

// TestProvisioningFitsTogether: the dashboard's panels use the datasource
// that Grafana's provisioning defines, every panel has a query, and the
// provider loads the directory compose mounts the dashboard into.
func TestProvisioningFitsTogether(t *testing.T) {
	var ds struct {
		Datasources []struct{ UID, Type, URL string } `yaml:"datasources"`
	}
	readYAML(t, "grafana/datasources.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("grafana/datasources.yml = %+v, want one prometheus datasource at http://prometheus:9090", ds.Datasources)
	}
	var providers struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/dashboards.yml", &providers)
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(providers.Providers) != 1 || !strings.Contains(string(compose), "./dashboards/grafana:"+providers.Providers[0].Options.Path) {
		t.Errorf("grafana/dashboards.yml loads %+v; docker-compose.yml must mount ./dashboards/grafana there", providers.Providers)
	}
	d := readDashboard(t)
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("grafana/inventory.json: uid %q, %d panels; want both", d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue // a row only heads the panels below it
		}
		if p.Datasource.UID != ds.Datasources[0].UID || len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q: datasource %q, %d queries; want datasource %q and a query", p.Title, p.Datasource.UID, len(p.Targets), ds.Datasources[0].UID)
		}
	}
}

// TestPrometheusScrapesTheFleetAndEveryPanelMoves starts the local fleet
// and Debian's prometheus with prometheus.yml (its targets replaced by the
// replicas' addresses, its interval shortened) and alerts.yml, waits until
// every target is up and every rule evaluates, reads each panel's query
// over the scrapes before any sale, then makes traffic and the conditions
// the panels are about, and requires each panel's query to show a value it
// did not show before: finite, not zero, above anything it showed without
// traffic (see moved). Without it a panel passes on its own: counters the
// service creates at zero, gauges scraped from the start, "or vector(0)".
func TestPrometheusScrapesTheFleetAndEveryPanelMoves(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary: %v (make deps installs Debian's prometheus)", err)
	}
	ctx := context.Background()
	// The work delay widens none's race between its check and its write, so
	// that a handful of buyers at once oversell it.
	f, err := fleet.Start(ctx, fleet.Options{NoFsync: true, AdminToken: "tok", NoLockServices: true,
		Env: map[string]string{"INVENTORY_WORK_DELAY": "2ms"}})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	prom, api := startPrometheus(t, bin, f)

	waitFor(t, "prometheus to see every replica up", func() (bool, string) {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					ScrapeURL string `json:"scrapeUrl"`
					Health    string `json:"health"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := getJSON(api+"targets", &r); err != nil {
			return false, err.Error()
		}
		up := 0
		for _, tg := range r.Data.ActiveTargets {
			if tg.Health == "up" {
				up++
			}
		}
		return up == len(f.Replicas) && len(r.Data.ActiveTargets) == len(f.Replicas), fmt.Sprintf("%+v", r.Data.ActiveTargets)
	}, prom)

	var ruleFile struct {
		Groups []struct {
			Rules []any `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "alerts.yml", &ruleFile)
	want := 0
	for _, g := range ruleFile.Groups {
		want += len(g.Rules)
	}
	waitFor(t, "prometheus to evaluate every alert rule against the fleet", func() (bool, string) {
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name   string `json:"name"`
						Health string `json:"health"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := getJSON(api+"rules", &r); err != nil {
			return false, err.Error()
		}
		ok, n := 0, 0
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				n++
				if rule.Health == "ok" {
					ok++
				}
			}
		}
		return n == want && ok == n, fmt.Sprintf("%d rules of %d, %d healthy: %+v", n, want, ok, r.Data.Groups)
	}, prom)

	// What the panels show with no traffic: every scrape so far (the rules
	// were evaluated, so there were some) of every panel's query.
	panels := readDashboard(t).Panels
	waitFor(t, "two scrapes of every replica before any sale", func() (bool, string) {
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := getJSON(api+"query?query="+url.QueryEscape(`count_over_time(up{job="inventory"}[1m])`), &r); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, s := range r.Data.Result {
			text, _ := s.Value[1].(string)
			if v, err := strconv.ParseFloat(text, 64); err == nil && v >= 2 {
				n++
			}
		}
		return n == len(f.Replicas), fmt.Sprintf("%+v", r.Data.Result)
	}, prom)
	quiet := time.Now()
	baseline := map[string]map[string][]float64{}
	for _, p := range panels {
		for _, target := range p.Targets {
			series, err := queryRange(api, target.Expr, quiet.Add(-time.Minute), quiet)
			if err != nil {
				t.Fatalf("panel %q's query %s before traffic: %v", p.Title, target.Expr, err)
			}
			baseline[target.Expr] = series
		}
	}

	makeTraffic(t, f)

	for _, p := range panels {
		for _, target := range p.Targets {
			what := fmt.Sprintf("panel %q's query %s to move under traffic (before it: %v)", p.Title, target.Expr, baseline[target.Expr])
			waitFor(t, what, func() (bool, string) {
				now, err := queryRange(api, target.Expr, quiet, time.Now())
				if err != nil {
					return false, err.Error()
				}
				if reason, ok := live[p.Title]; ok {
					return changed(now), fmt.Sprintf("%v (%s)", now, reason)
				}
				if s, ok := steady[p.Title]; ok {
					return s.ok(now), fmt.Sprintf("%v (%s)", now, s.reason)
				}
				return moved(baseline[target.Expr], now), fmt.Sprintf("%v", now)
			}, prom)
		}
	}
}

// live are the panels that no traffic moves, by title, and why: the test
// requires of them only that they are live, some series taking two
// different values since the traffic began (see changed).
var live = map[string]string{
	// A replica pings Postgres and Redis when it is scraped, outside any
	// sale: the round trip is the backends' and the network's, and sales
	// on two cores move it up or down by chance. A backend that does not
	// answer drops its series (inventory_backend_up says so, and the
	// InventoryBackendDown rule, tested with promtool, alerts on it).
	"Postgres and Redis round trip": "pinged at each scrape, whatever the traffic",
	// The expiry job runs every second from the replicas' start, traffic
	// or not; its mean lag moves with the timers' wake-ups.
	"Expiry job start lag (mean)": "the job runs every second whatever the traffic",
}

// steady are the panels that show the same value with traffic and
// without, by title: what that value must be, and why.
var steady = map[string]struct {
	reason string
	ok     func(now map[string][]float64) bool
}{
	"Expiry job runner by replica": {
		reason: "exactly one replica runs the expiry job, from its start: at the last step one series is 1, the others 0",
		ok: func(now map[string][]float64) bool {
			var ones, others int
			for _, values := range now {
				switch values[len(values)-1] {
				case 1:
					ones++
				case 0:
				default:
					others++
				}
			}
			return ones == 1 && others == 0 && len(now) > 1
		},
	},
}

// moved reports whether a series of now shows a value the panel did not
// show before: finite, not zero, and above the series' largest value in
// before (if it had one). A rate, a quantile or an increase shows nothing,
// zero or NaN without traffic; a gauge of connections in use shows what
// the scrapes themselves hold.
func moved(before, now map[string][]float64) bool {
	for labels, values := range now {
		top := math.Inf(-1)
		for _, v := range before[labels] {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
		for _, v := range values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v != 0 && v > top {
				return true
			}
		}
	}
	return false
}

// changed reports whether some series of now took two different finite
// values, the first of them not zero.
func changed(now map[string][]float64) bool {
	for _, values := range now {
		for _, v := range values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v != 0 && values[0] != v {
				return true
			}
		}
	}
	return false
}

// makeTraffic starts what moves the panels, stopped when t ends:
//   - redis sales of sku-dash, paced, for the sales, latency and lock
//     panels; a sale of the sold-out sku-dash-gone after each, for the
//     refused panel;
//   - three buyers of sku-dash-conns with forupdate, unpaced: each holds a
//     Postgres connection through its row lock and work delay, so that the
//     connections panel shows them at any scrape;
//   - a lock breach: sku-dash's fence in Postgres raised past the tokens
//     Redis hands out, as a holder whose lock was taken over would find it,
//     so that Postgres refuses the next holders' writes;
//   - orders: holds paid, cancelled and left to expire, and anonymous
//     product reads, for the order and product read panels; one held
//     order kept locked past its deadline, for the overdue panel (see
//     holdOverdue);
//   - an oversell: none sells sku-dash-none-N (3 units) to 16 buyers at
//     once until one round goes below zero (a few tries at most), which the
//     watchdog reports as a violation and answers by opening the product's
//     circuit.
func makeTraffic(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	c := f.Client()
	for id, units := range map[string]int64{"sku-dash": 1000, "sku-dash-gone": 1, "sku-dash-conns": 1_000_000,
		"sku-dash-orders": 1_000_000, "sku-dash-overdue": 1} {
		if _, err := c.Restock(ctx, id, client.RestockRequest{Quantity: units}); err != nil {
			t.Fatalf("PUT /products/%s: %v", id, err)
		}
	}
	if _, err := c.Sell(ctx, client.SaleRequest{ProductID: "sku-dash-gone", Quantity: 1}, client.SaleOptions{}); err != nil {
		t.Fatalf("the one sale of sku-dash-gone: %v", err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Pacing, not a wait for a state: a steady trickle makes the 1000
		// units last through many scrapes, and the panels' rate() queries
		// need sales between two of them.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = c.Sell(ctx, client.SaleRequest{ProductID: "sku-dash", Quantity: 1}, client.SaleOptions{Strategy: "redis"})
			_, _ = c.Sell(ctx, client.SaleRequest{ProductID: "sku-dash-gone", Quantity: 1}, client.SaleOptions{})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Orders, paced as the sales are, for the order panels: each tick
		// a hold paid at once, one cancelled, one left to expire within
		// 1 s (the expired and held panels), and an anonymous product read
		// (the product reads panel). A few holds within 15m stay held.
		for range 3 {
			_, _ = c.Hold(ctx, client.SaleRequest{ProductID: "sku-dash-orders", Quantity: 1, PayWithin: "15m"}, client.SaleOptions{})
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if h, err := c.Hold(ctx, client.SaleRequest{ProductID: "sku-dash-orders", Quantity: 1, PayWithin: "15m"}, client.SaleOptions{}); err == nil {
				_, _ = c.Pay(ctx, h.OrderID)
			}
			if h, err := c.Hold(ctx, client.SaleRequest{ProductID: "sku-dash-orders", Quantity: 1, PayWithin: "15m"}, client.SaleOptions{}); err == nil {
				_, _ = c.Cancel(ctx, h.OrderID)
			}
			_, _ = c.Hold(ctx, client.SaleRequest{ProductID: "sku-dash-orders", Quantity: 1, PayWithin: "1s"}, client.SaleOptions{})
			_, _ = c.ProductCached(ctx, "sku-dash")
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	holdOverdue(t, f, c)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, _ = c.Sell(ctx, client.SaleRequest{ProductID: "sku-dash-conns", Quantity: 1}, client.SaleOptions{Strategy: "forupdate"})
			}
		}()
	}

	pool, err := pgxpool.New(ctx, f.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testenv.WaitFor(t, "a redis sale of sku-dash", time.Minute, func() bool {
		p, err := c.Product(ctx, "sku-dash")
		return err == nil && p.Sold > 0
	})
	if _, err := pool.Exec(ctx, `UPDATE fences SET token = token + 20 WHERE product_id = 'sku-dash'`); err != nil {
		t.Fatalf("raise sku-dash's fence: %v", err)
	}

	tries := 0
	testenv.WaitFor(t, "none to oversell a product", time.Minute, func() bool {
		tries++
		id := fmt.Sprintf("sku-dash-none-%d", tries)
		if _, err := c.Restock(ctx, id, client.RestockRequest{Quantity: 3}); err != nil {
			t.Fatalf("PUT /products/%s: %v", id, err)
		}
		gate := make(chan struct{})
		var buyers sync.WaitGroup
		for range 16 {
			buyers.Add(1)
			go func() {
				defer buyers.Done()
				<-gate
				_, _ = c.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{Strategy: "none"})
			}()
		}
		close(gate)
		buyers.Wait()
		p, err := c.Product(ctx, id)
		if err != nil {
			t.Fatalf("GET /products/%s: %v", id, err)
		}
		return p.Quantity < 0
	})
}

// holdOverdue holds sku-dash-overdue's one unit for 1 s and keeps the
// order's row locked from another session until t ends, as a step that
// never finishes would: the expiry sweeps skip it (FOR UPDATE SKIP
// LOCKED), so that after each sweep it is more overdue, for the overdue
// panel. Should the order expire before the lock is taken, the unit
// comes back and it holds again.
func holdOverdue(t *testing.T, f *fleet.Fleet, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	testenv.WaitFor(t, "a held order of sku-dash-overdue locked before its deadline", time.Minute, func() bool {
		h, err := c.Hold(ctx, client.SaleRequest{ProductID: "sku-dash-overdue", Quantity: 1, PayWithin: "1s"}, client.SaleOptions{})
		if err != nil {
			return false // sold out until the last try's order expires
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM orders WHERE id = $1 FOR UPDATE`, h.OrderID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state != "held" {
			_ = tx.Rollback(ctx)
			return false
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return true
	})
}

// startPrometheus runs prometheus with prometheus.yml scraping f's replicas
// every second and alerts.yml evaluated every second; it returns the
// process and its API's base URL.
func startPrometheus(t *testing.T, bin string, f *fleet.Fleet) (*localstack.Process, string) {
	t.Helper()
	var cfg map[string]any
	readYAML(t, "prometheus.yml", &cfg)
	var targets []string
	for _, r := range f.Replicas {
		targets = append(targets, strings.TrimPrefix(r.URL, "http://"))
	}
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	jobs := cfg["scrape_configs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("prometheus.yml has %d scrape configs, want 1", len(jobs))
	}
	jobs[0].(map[string]any)["static_configs"] = []any{map[string]any{"targets": targets}}
	dir := t.TempDir()
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	prom, err := localstack.StartProcess("prometheus", exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr), syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Stop(10 * time.Second) })
	return prom, "http://" + addr + "/api/v1/"
}

// queryRange evaluates expr at every second from start to end: each
// series' values by its labels.
func queryRange(api, expr string, start, end time.Time) (map[string][]float64, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	q := url.Values{"query": {expr}, "start": {promTime(start)}, "end": {promTime(end)}, "step": {"1"}}
	if err := getJSON(api+"query_range?"+q.Encode(), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("status %s: %s", r.Status, r.Error)
	}
	out := map[string][]float64{}
	for _, s := range r.Data.Result {
		key := fmt.Sprint(s.Metric)
		for _, v := range s.Values {
			text, _ := v[1].(string)
			f, err := strconv.ParseFloat(text, 64) // "NaN", "+Inf" included
			if err != nil {
				return nil, fmt.Errorf("series %s: value %q: %w", key, text, err)
			}
			out[key] = append(out[key], f)
		}
	}
	return out, nil
}

func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// waitFor polls cond every 200ms for up to 60s; on failure it reports
// cond's last word and prometheus's log.
func waitFor(t *testing.T, what string, cond func() (bool, string), prom *localstack.Process) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s; last: %s\nprometheus log:\n%s", what, last, prom.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func getJSON(u string, into any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
