// Package dashboards holds the Prometheus scrape config and the Grafana
// provisioning that docker compose mounts (profile "dashboards"); its test
// runs Debian's prometheus with that config against the local fleet.
package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
		if p.Datasource.UID != ds.Datasources[0].UID || len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q: datasource %q, %d queries; want datasource %q and a query", p.Title, p.Datasource.UID, len(p.Targets), ds.Datasources[0].UID)
		}
	}
}

// TestPrometheusScrapesTheFleetAndEveryPanelHasData starts the local fleet
// and Debian's prometheus with prometheus.yml (its targets replaced by the
// replicas' addresses, its interval shortened), sells with a lock strategy,
// and checks that every target is up and every panel's query returns
// series.
func TestPrometheusScrapesTheFleetAndEveryPanelHasData(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary: %v (make deps installs Debian's prometheus)", err)
	}
	ctx := context.Background()
	f, err := fleet.Start(ctx, fleet.Options{NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })

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
	api := "http://" + addr + "/api/v1/"

	// Sales with a lock strategy, so the lock panels have data too.
	if _, err := f.Client().Restock(ctx, "sku-dash", client.RestockRequest{Quantity: 1000}); err != nil {
		t.Fatalf("PUT /products/sku-dash: %v", err)
	}
	stop := make(chan struct{})
	sold := make(chan struct{})
	go func() {
		defer close(sold)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = f.Client().Sell(ctx, client.SaleRequest{ProductID: "sku-dash", Quantity: 1}, client.SaleOptions{Strategy: "redis"})
			// Pacing, not a wait for a state: a steady trickle makes the
			// 1000 units last through many scrapes, and the panels' rate()
			// queries need sales between two of them.
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { close(stop); <-sold })

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
		return up == len(targets) && len(r.Data.ActiveTargets) == len(targets), fmt.Sprintf("%+v", r.Data.ActiveTargets)
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

	for _, p := range readDashboard(t).Panels {
		for _, target := range p.Targets {
			waitFor(t, fmt.Sprintf("panel %q's query %s to return series", p.Title, target.Expr), func() (bool, string) {
				var r struct {
					Status string `json:"status"`
					Error  string `json:"error"`
					Data   struct {
						Result []json.RawMessage `json:"result"`
					} `json:"data"`
				}
				if err := getJSON(api+"query?query="+url.QueryEscape(target.Expr), &r); err != nil {
					return false, err.Error()
				}
				return r.Status == "success" && len(r.Data.Result) > 0, fmt.Sprintf("status %s %s, %d series", r.Status, r.Error, len(r.Data.Result))
			}, prom)
		}
	}
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
