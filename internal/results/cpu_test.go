package results

import (
	"encoding/json"
	"strings"
	"testing"

	"inventory/internal/cpuprof"
)

// TestConvertTheCPUJSON converts what `loadtest cpu --json` writes
// (cpuprof.Report itself, so that a renamed field fails here).
func TestConvertTheCPUJSON(t *testing.T) {
	rep := cpuprof.Report{StartedAt: "2026-11-29T05:30:10Z", Commit: "abc1234", Clients: 64, Seconds: 5, Warmup: 1,
		Replicas: 2, WorkDelay: "2ms", Fsync: true, Rows: []cpuprof.Row{
			{Kind: "healthz", Title: "GET /healthz", Expected: "200", Answers: 70000, Statuses: map[string]int64{"200": 70000}, PerSecond: 14000.4,
				PerAnswer: map[string]float64{"postgres": 0.21, "replicas": 73.46, "nginx": 33, "redis": 0, "other": 0.4, "generator": 15, "fleet": 107.1}, XHealthz: 1},
			{Kind: "sold-out", Title: "sold-out 409", Strategy: "redis", Expected: "409", Answers: 50000, PerSecond: 10000,
				PerAnswer: map[string]float64{"fleet": 136}, XHealthz: 1.27},
			{Kind: "redis", Title: "redis sale", Strategy: "redis", Expected: "2xx", Answers: 1150, Unexpected: 3,
				Statuses: map[string]int64{"200": 1100, "201": 47, "503": 2, "500": 1}, PerSecond: 229.6,
				PerAnswer: map[string]float64{"postgres": 1393.44, "replicas": 2108, "fleet": 3692.5}, XHealthz: 34.476},
		}}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	r := convert(t, "cpu", data)
	if r.Series != "per-process" || r.Date != "2026-11-29T05:30Z" || r.Commit != "abc1234" {
		t.Errorf("cpu record: series %q, date %q, commit %q; want per-process, 2026-11-29T05:30Z, abc1234", r.Series, r.Date, r.Commit)
	}
	want := `[{"answer":"GET /healthz","answers_per_s":14000,"fleet":107,"generator":15,"nginx":33,"other":0.4,"postgres":0.2,"redis":0,"replicas":73,"x_healthz":1},` +
		`{"answer":"sold-out 409 (redis, the fleet default)","answers_per_s":10000,"fleet":136,"x_healthz":1.3},` +
		`{"answer":"redis sale","answers_per_s":230,"fleet":3693,"other_answers":"1 × 500, 2 × 503","postgres":1393,"replicas":2108,"x_healthz":34.5}]`
	if got := mustJSON(t, r.Rows); got != want {
		t.Errorf("cpu record rows\n%s\nwant\n%s", got, want)
	}
	for _, w := range []string{"64 closed-loop clients", "5s measured after 1s of warm-up", "INVENTORY_WORK_DELAY=2ms", "fsync on", "cutime+cstime"} {
		if !strings.Contains(r.Setup, w) {
			t.Errorf("cpu record setup = %q, want %q in it", r.Setup, w)
		}
	}
	k, _ := KindNamed("cpu")
	for _, bad := range []string{`{"started_at":"2026-11-29T05:30:10Z","rows":[]}`, `{"started_at":"now","rows":[{"kind":"healthz"}]}`, `{`} {
		if _, err := k.Convert([]byte(bad)); err == nil {
			t.Errorf("cpu.Convert(%s) = nil error", bad)
		}
	}
}
