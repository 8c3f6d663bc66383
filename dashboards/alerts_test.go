package dashboards

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestAlertRules runs promtool's unit tests of the alert rules
// (alerts_test.yml): each alert fires on the series that mean trouble, with
// the labels and words it should, and stays quiet on a healthy fleet's.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("no promtool: %v (make deps installs Debian's prometheus, which ships it)", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesAndPanelsUseTheServicesMetrics: every inventory_* series
// an alert or a panel reads is one the service exports (a histogram's by
// its name without _bucket, _sum or _count), so a renamed metric cannot
// silence an alert or blank a panel while the alerts' unit tests, which
// make up their own series, still pass.
func TestAlertRulesAndPanelsUseTheServicesMetrics(t *testing.T) {
	var exported strings.Builder
	for _, f := range []string{"../internal/metrics/metrics.go", "../internal/metrics/ping.go",
		"../internal/metrics/productcache.go", "../internal/jobs/metrics.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exported.Write(b)
	}
	isExported := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && strings.Contains(exported.String(), `"`+base+`"`) {
				return true
			}
		}
		return false
	}
	for _, file := range []string{"alerts.yml", "grafana/inventory.json"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`inventory_[a-z_]+`).FindAllString(string(text), -1)
		if len(names) == 0 {
			t.Fatalf("%s reads no inventory_* series", file)
		}
		for _, name := range names {
			if !isExported(name) {
				t.Errorf("%s reads %s, which the service does not export", file, name)
			}
		}
	}
}
