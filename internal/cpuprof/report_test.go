package cpuprof

import (
	"bytes"
	"strings"
	"testing"
)

func TestNewRowTurnsTicksIntoMicrosecondsPerAnswer(t *testing.T) {
	k := Sale("redis", "cpu-redis")
	// 2 s, 400 sales and 4 lock timeouts; 1 tick = 10 ms.
	row := newRow(k, 2, map[int]int64{200: 400, 503: 4}, map[string]uint64{GroupPostgres: 50, GroupFleet: 202, GroupGenerator: 0})
	if row.Answers != 404 || row.Unexpected != 4 || row.PerSecond != 202 || row.Statuses["503"] != 4 || row.Expected != "2xx" {
		t.Errorf("newRow: answers %d, unexpected %d, %v/s, statuses %v, expected %q; want 404, 4, 202/s, 503: 4, 2xx",
			row.Answers, row.Unexpected, row.PerSecond, row.Statuses, row.Expected)
	}
	// 202 ticks = 2,020 ms over 404 answers = 5,000 µs each.
	if row.CPUms[GroupFleet] != 2020 || row.PerAnswer[GroupFleet] != 5000 || row.PerAnswer[GroupPostgres] != 1237.6 || row.PerAnswer[GroupGenerator] != 0 {
		t.Errorf("newRow: CPU %v ms, per answer %v µs; want fleet 2020 ms = 5000 µs an answer, postgres 1237.6 µs, generator 0", row.CPUms, row.PerAnswer)
	}
	if none := newRow(Healthz(), 1, nil, map[string]uint64{GroupFleet: 3}); none.Answers != 0 || none.PerAnswer[GroupFleet] != 0 {
		t.Errorf("newRow without answers = %+v, want no figure per answer (not a division by zero)", none)
	}
}

func TestRatiosAreToHealthzFleetCPU(t *testing.T) {
	rows := []Row{
		{Kind: "healthz", PerAnswer: map[string]float64{GroupFleet: 104, GroupGenerator: 500}},
		{Kind: "sold-out", PerAnswer: map[string]float64{GroupFleet: 136}},
		{Kind: "atomic", PerAnswer: map[string]float64{GroupFleet: 2327}},
	}
	Ratios(rows)
	for i, want := range []float64{1, 1.31, 22.38} {
		if rows[i].XHealthz != want {
			t.Errorf("Ratios: %s × /healthz = %v, want %v (the generator's CPU left out)", rows[i].Kind, rows[i].XHealthz, want)
		}
	}
	alone := []Row{{Kind: "atomic", XHealthz: 3, PerAnswer: map[string]float64{GroupFleet: 2327}}}
	if Ratios(alone); alone[0].XHealthz != 0 {
		t.Errorf("Ratios without /healthz = %v, want 0 (not measured)", alone[0].XHealthz)
	}
}

func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		want   string
		status int
		ok     bool
	}{
		{"200", 200, true}, {"200", 201, false}, {"409", 409, true}, {"409", 503, false},
		{"2xx", 200, true}, {"2xx", 201, true}, {"2xx", 299, true}, {"2xx", 300, false}, {"2xx", 503, false},
	} {
		if got := expected(tc.want, tc.status); got != tc.ok {
			t.Errorf("expected(%q, %d) = %v, want %v", tc.want, tc.status, got, tc.ok)
		}
	}
}

func TestPrintTable(t *testing.T) {
	rows := []Row{
		newRow(Healthz(), 1, map[int]int64{200: 100}, map[string]uint64{GroupFleet: 1, GroupNginx: 1}),
		newRow(Sale("redis", "p"), 1, map[int]int64{200: 10, 503: 2}, map[string]uint64{GroupFleet: 3}),
	}
	Ratios(rows)
	var b bytes.Buffer
	PrintTable(&b, rows)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("PrintTable wrote %d lines, want a head and 2 rows:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"answer", "answers/s", "Postgres", "both replicas", "nginx", "Redis", "other servers", "load generator", "fleet, no generator", "× /healthz", "other answers"},
		{"GET /healthz", "100", "100.0", " 1.00", " 0"},
		{"redis sale", "12", "2500.0", "25.00", "503: 2"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("PrintTable line %d = %q, want %q in it", i+1, lines[i], w)
			}
		}
	}
	if !strings.HasPrefix(lines[1], "GET /healthz ") || len([]rune(lines[1])) != len([]rune(lines[0])) {
		t.Errorf("PrintTable: rows not aligned under the head:\n%s", b.String())
	}
}
