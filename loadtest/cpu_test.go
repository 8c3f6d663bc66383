package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"inventory/internal/client"
	"inventory/internal/cpuprof"
	"inventory/internal/testenv"
)

func TestCPUFlags(t *testing.T) {
	o, err := parseCPUFlags(nil, &bytes.Buffer{})
	if err != nil || o.clients != 64 || o.window != 5*time.Second || o.warmup != time.Second || o.strategies != "atomic,redis,batch" {
		t.Errorf("parseCPUFlags() = %+v, %v; want 64 clients, 5s, 1s of warm-up, atomic,redis,batch", o, err)
	}
	if got := cpuStrategies(" atomic,,redis ,atomic"); len(got) != 2 || got[0] != "atomic" || got[1] != "redis" {
		t.Errorf(`cpuStrategies(" atomic,,redis ,atomic") = %q, want [atomic redis]`, got)
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"cpu", "--clients", "0"},
		{"cpu", "--clients", "5000"},
		{"cpu", "--time", "10ms"},
		{"cpu", "--warmup", "-1s"},
		{"cpu", "--work-delay", "-1ms"},
		{"cpu", "--strategies", "a-name-far-too-long-to-be-any-strategy-of-the-service-or-a-product-id-of-it-either-way-really-long-indeed-more-than-a-hundred-and-twenty-eight"},
		{"cpu", "--url", "http://127.0.0.1:1", "--binary", "bin/inventory"},
		{"cpu", "--url", "http://127.0.0.1:1", "--work-delay", "0"},
		{"cpu", "--nope"},
		{"cpu", "extra"},
		// A cpu record comes from loadtest cpu, and loadtest cpu's JSON is no other kind.
		{"results", "record", "-docs", dir, "cpu", "--", "--stock", "10"},
		{"results", "record", "-docs", dir, "hot-product", "--", "cpu"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error (before any fleet starts)", args, err)
		}
	}
}

// TestCPUMeasuresAFleet measures a short window of GET /healthz, the
// sold-out answer and an atomic sale on the two-replica fleet, with a
// profile of each replica, and checks the figures' structure and sense —
// not a speed: every answer the expected one, every group read, the
// fleet the sum of its parts, and a sale costing the fleet more CPU than a
// /healthz.
func TestCPUMeasuresAFleet(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startE2EFleet(ctx, t)
	kinds, err := cpuKinds(ctx, f.Client(), []string{"atomic"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cpuKinds(ctx, f.Client(), []string{"nope"}); !errors.Is(err, errUsage) {
		t.Errorf("cpuKinds(nope) = %v, want a usage error naming the strategies", err)
	}
	rows, err := cpuprof.Measure(ctx, fleetOf(f), kinds, cpuprof.Options{
		Clients: 4, Duration: time.Second, Warmup: 200 * time.Millisecond, ProfileDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Measure = %v", err)
	}
	if len(rows) != 3 || rows[0].Kind != "healthz" || rows[1].Kind != "sold-out" || rows[2].Kind != "atomic" {
		t.Fatalf("Measure rows = %+v, want healthz, sold-out, atomic", rows)
	}
	for _, r := range rows {
		if r.Answers == 0 || r.Unexpected != 0 || r.PerSecond <= 0 {
			t.Errorf("%s: %d answers (%v), %d unexpected, %v/s; want answers, all of them %s", r.Title, r.Answers, r.Statuses, r.Unexpected, r.PerSecond, r.Expected)
		}
		for _, g := range []string{cpuprof.GroupPostgres, cpuprof.GroupReplicas, "inventory-1", "inventory-2", cpuprof.GroupNginx,
			cpuprof.GroupRedis, cpuprof.GroupOther, cpuprof.GroupFleet, cpuprof.GroupGenerator} {
			if _, ok := r.CPUms[g]; !ok {
				t.Errorf("%s: no CPU of %s read (%v)", r.Title, g, r.CPUms)
			}
		}
		c := r.CPUms
		if sum := c[cpuprof.GroupPostgres] + c[cpuprof.GroupReplicas] + c[cpuprof.GroupNginx] + c[cpuprof.GroupRedis] + c[cpuprof.GroupOther]; c[cpuprof.GroupFleet] != sum {
			t.Errorf("%s: the fleet's CPU %v ms, want the sum of its groups %v ms (%v)", r.Title, c[cpuprof.GroupFleet], sum, c)
		}
		if c[cpuprof.GroupReplicas] <= 0 || c[cpuprof.GroupGenerator] <= 0 {
			t.Errorf("%s: replicas %v ms, generator %v ms; every answer passes both", r.Title, c[cpuprof.GroupReplicas], c[cpuprof.GroupGenerator])
		}
		if len(r.Profiles) != 2 {
			t.Errorf("%s: profiles %q, want one per replica", r.Title, r.Profiles)
		}
		for _, p := range r.Profiles {
			if b, err := os.ReadFile(p); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%s: profile %s is not a gzipped pprof profile (%d bytes, %v)", r.Title, p, len(b), err)
			}
		}
	}
	// Thousands of answers a second pass nginx's workers: a tick or more
	// even on a loaded machine (a sale's few hundred might not).
	if rows[0].CPUms[cpuprof.GroupNginx] <= 0 {
		t.Errorf("GET /healthz: nginx used no CPU (%v): its workers are not counted", rows[0].CPUms)
	}
	if rows[2].CPUms[cpuprof.GroupPostgres] <= 0 {
		t.Errorf("atomic sale: Postgres used no CPU (%v): its backends are not counted", rows[2].CPUms)
	}
	if rows[0].XHealthz != 1 || rows[2].XHealthz <= 1 {
		t.Errorf("× /healthz: healthz %v, atomic sale %v; want 1 and above 1 (µs an answer: %v, %v)",
			rows[0].XHealthz, rows[2].XHealthz, rows[0].PerAnswer, rows[2].PerAnswer)
	}
	var b bytes.Buffer
	cpuprof.PrintTable(&b, rows)
	t.Logf("4 clients, 1 s each:\n%s", b.String())
}

// TestCPUBudgetsPrinted: after the table, `loadtest cpu` judges issue 38's
// CPU budgets by what the fleet says each strategy is: the fastest safe
// sale against 2× /healthz, each safe lock strategy against 5×.
func TestCPUBudgetsPrinted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"name":"atomic","safe":true},{"name":"redis","safe":true,"lock_backend":"redislock"},{"name":"batch","safe":true,"batches":true}]`))
	}))
	defer srv.Close()
	rows := []cpuprof.Row{
		{Kind: "healthz", Title: "GET /healthz", PerSecond: 15000, XHealthz: 1},
		{Kind: "sold-out", Title: "sold-out 409", Strategy: "redis", PerSecond: 13000, XHealthz: 1.1},
		{Kind: "atomic", Title: "atomic sale", Strategy: "atomic", PerSecond: 500, XHealthz: 36},
		{Kind: "redis", Title: "redis sale", Strategy: "redis", PerSecond: 200, XHealthz: 47.7},
		{Kind: "batch", Title: "batch sale", Strategy: "batch", PerSecond: 4875, XHealthz: 3.2},
	}
	var out bytes.Buffer
	printCPUBudgets(context.Background(), &out, client.New(srv.URL, client.Options{}), rows, 64)
	lines := strings.Split(out.String(), "\n")
	find := func(strategy string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && slices.Contains(f, strategy) {
				return l
			}
		}
		return ""
	}
	for strategy, want := range map[string][]string{
		"batch": {"(fastest safe)", "3.20×", "≤ 2.00×", "NOT MET"},
		"redis": {"(lock strategy)", "47.70×", "≤ 5.00×", "NOT MET"},
	} {
		l := find(strategy)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("printCPUBudgets: %s's line %q lacks %q:\n%s", strategy, l, w, out.String())
			}
		}
	}
	if l := find("atomic"); l != "" {
		t.Errorf("printCPUBudgets judged atomic (%q), want only the fastest safe sale and the lock strategies:\n%s", l, out.String())
	}
	if !strings.Contains(out.String(), "budgets (issue 38)") {
		t.Errorf("printCPUBudgets wrote no title:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}
