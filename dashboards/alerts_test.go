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

// TestAlertRulesUseTheServicesMetrics: every inventory_* series an alert
// reads is one the service exports, so a renamed metric cannot silence an
// alert while its unit tests, which make up their own series, still pass.
func TestAlertRulesUseTheServicesMetrics(t *testing.T) {
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var exported strings.Builder
	for _, f := range []string{"../internal/metrics/metrics.go", "../internal/metrics/ping.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exported.Write(b)
	}
	names := regexp.MustCompile(`inventory_[a-z_]+`).FindAllString(string(rules), -1)
	if len(names) == 0 {
		t.Fatal("alerts.yml reads no inventory_* series")
	}
	for _, name := range names {
		if !strings.Contains(exported.String(), `"`+name+`"`) {
			t.Errorf("alerts.yml reads %s, which internal/metrics does not export", name)
		}
	}
}
