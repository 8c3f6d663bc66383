package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inventory/internal/load"
	"inventory/internal/report"
)

func record(date, commit string, rows ...Row) Record {
	return Record{
		Date: date, Commit: commit, Machine: Machine{Cores: 2, Load: []float64{1.5}, Beside: "nothing"},
		Command: "go run ./loadtest --strategies a,b",
		Columns: []Column{{Key: "strategy", Title: "strategy", Code: true}, {Key: "sales", Title: "sales/s"}},
		Rows:    rows,
	}
}

func TestUpdateWritesTheNewestRecordBetweenMarkers(t *testing.T) {
	records := map[string][]Record{"x.jsonl": {
		record("2026-11-24T10:00Z", "new", Row{"strategy": "a", "sales": 1500.0}),
		record("2026-11-23", "old", Row{"strategy": "a", "sales": 10.0}),
	}}
	doc := "# T\n\nbefore\n\n<!-- results x.jsonl -->\nstale text\n<!-- /results -->\n\nafter\n"
	got, err := Update([]byte(doc), records, "results")
	if err != nil {
		t.Fatal(err)
	}
	want := "# T\n\nbefore\n\n<!-- results x.jsonl -->\n" +
		"| strategy | sales/s |\n|---|---|\n| `a` | 1,500 |\n\n" +
		"Measured 2026-11-24 10:00 UTC at `new` on 2 cores (load average 1.5; beside it: nothing) with `go run ./loadtest --strategies a,b`. History: [results/x.jsonl](results/x.jsonl).\n" +
		"<!-- /results -->\n\nafter\n"
	if string(got) != want {
		t.Errorf("Update =\n%s\nwant\n%s", got, want)
	}
	again, err := Update(got, records, "results")
	if err != nil || string(again) != string(got) {
		t.Errorf("Update of its own output changed it (err %v):\n%s", err, again)
	}
}

func TestNewestOfOneDateIsTheLastWritten(t *testing.T) {
	rs := []Record{record("2026-11-23", "first"), record("2026-11-23", "second"), record("2026-11-22T23:59Z", "older")}
	r, ok := Newest(rs, func(Record) bool { return true })
	if !ok || r.Commit != "second" {
		t.Errorf("Newest = %q, %v; want the record written last of the newest date, %q", r.Commit, ok, "second")
	}
}

func TestMarkerChoosesSeriesRowsAndColumns(t *testing.T) {
	a := record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0}, Row{"strategy": "y", "sales": 2.0}, Row{"strategy": "z", "sales": 3.0})
	b := record("2026-11-26", "b", Row{"strategy": "x", "sales": 4.0}) // newer, but has no y
	c := record("2026-11-27", "c", Row{"strategy": "y", "sales": 5.0}, Row{"strategy": "z", "sales": 6.0})
	c.Series = "other"
	records := map[string][]Record{"x.jsonl": {a, b, c}}
	for _, tc := range []struct {
		marker, want string
	}{
		{"<!-- results x.jsonl select=strategy:z,y columns=sales -->", "| sales/s |\n|---|\n| 6 |\n| 5 |\n"},
		{"<!-- results x.jsonl select=strategy:z,x columns=sales,strategy -->", "| sales/s | strategy |\n|---|---|\n| 3 | `z` |\n| 1 | `x` |\n"},
		{"<!-- results x.jsonl series=other -->", "| strategy | sales/s |\n|---|---|\n| `y` | 5 |\n| `z` | 6 |\n"},
	} {
		got, err := Update([]byte(tc.marker+"\n<!-- /results -->\n"), records, "results")
		if err != nil {
			t.Errorf("Update(%s): %v", tc.marker, err)
			continue
		}
		if !strings.HasPrefix(string(got), tc.marker+"\n"+tc.want+"\n") {
			t.Errorf("Update(%s) =\n%s\nwant the table\n%s", tc.marker, got, tc.want)
		}
	}
}

func TestRowsNewestTakesEachRowFromItsOwnNewestRecord(t *testing.T) {
	old := record("2026-11-20", "old", Row{"strategy": "x", "sales": 1.0}, Row{"strategy": "y", "sales": 2.0})
	mid := record("2026-11-21T10:00Z", "mid", Row{"strategy": "y", "sales": 3.0})
	mid.Command = "make test   # twice"
	other := record("2026-11-22", "other", Row{"strategy": "x", "sales": 9.0})
	other.Series = "elsewhere"
	records := map[string][]Record{"x.jsonl": {old, mid, other}}
	got, err := Update([]byte("<!-- results x.jsonl select=strategy:x,y rows=newest -->\n<!-- /results -->\n"), records, "results")
	if err != nil {
		t.Fatal(err)
	}
	want := "| strategy | sales/s | measured | command |\n|---|---|---|---|\n" +
		"| `x` | 9 | 2026-11-22 at other | `go run ./loadtest --strategies a,b` |\n" +
		"| `y` | 3 | 2026-11-21 10:00 UTC at mid | `make test # twice` |\n"
	if !strings.Contains(string(got), want) {
		t.Errorf("rows=newest =\n%s\nwant the table\n%s", got, want)
	}
	if _, err := Update([]byte("<!-- results x.jsonl rows=newest -->\n<!-- /results -->\n"), records, "results"); err == nil || !strings.Contains(err.Error(), "needs select") {
		t.Errorf("rows=newest without select: %v, want an error saying it needs select", err)
	}
}

func TestUpdateRefusesWhatItCannotWrite(t *testing.T) {
	records := map[string][]Record{"x.jsonl": {record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0})}}
	for _, tc := range []struct{ doc, want string }{
		{"\n<!-- results x.jsonl -->\nno end\n", "line 2: <!-- results x.jsonl --> has no <!-- /results -->"},
		{"<!-- results x.jsonl -->\n<!-- results x.jsonl -->\n<!-- /results -->\n", "line 1:"},
		{"<!-- results y.jsonl -->\n<!-- /results -->\n", "no records file y.jsonl"},
		{"<!-- results x.jsonl colour=red -->\n<!-- /results -->\n", `unknown option "colour"`},
		{"<!-- results x.jsonl select=strategy -->\n<!-- /results -->\n", "select wants KEY:V1,V2"},
		{"<!-- results x.jsonl select=strategy:w -->\n<!-- /results -->\n", "no record in x.jsonl"},
		{"<!-- results x.jsonl series=s -->\n<!-- /results -->\n", "no record in x.jsonl"},
		{"<!-- results x.jsonl columns=p99 -->\n<!-- /results -->\n", `no column "p99"`},
		{"<!-- results select=strategy:x -->\n<!-- /results -->\n", "names no file"},
		{"<!-- results x.jsonl series= -->\n<!-- /results -->\n", "is not key=value"},
	} {
		_, err := Update([]byte(tc.doc), records, "results")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Update(%q) = %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
}

func TestAnIndentedMarkerIndentsItsBlock(t *testing.T) {
	records := map[string][]Record{"x.jsonl": {record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0})}}
	got, err := Update([]byte("- item\n\n  <!-- results x.jsonl -->\n  <!-- /results -->\n"), records, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")[2:] {
		if l != "" && !strings.HasPrefix(l, "  ") {
			t.Errorf("line %q of the block under an indented marker is not indented:\n%s", l, got)
		}
	}
}

func TestAMultiLineCommandFollowsInABlock(t *testing.T) {
	r := record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0})
	r.Command = "bin/fleet &\ngo run ./loadtest --url …"
	got, err := Update([]byte("<!-- results x.jsonl -->\n<!-- /results -->\n"), map[string][]Record{"x.jsonl": {r}}, "results")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "with the commands below.") || !strings.Contains(string(got), "```sh\nbin/fleet &\ngo run ./loadtest --url …\n```\n") {
		t.Errorf("Update with a two-line command =\n%s", got)
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 1691: "1,691", 51554: "51,554", 1234567: "1,234,567",
		-31: "-31", -1234: "-1,234", 0.47: "0.47", 1333.2: "1,333.2", 12.8: "12.8", 4.22: "4.22",
	} {
		if got := number(v); got != want {
			t.Errorf("number(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0})
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(a good record) = %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Record)
		want   string
	}{
		{"no date", func(r *Record) { r.Date = "" }, "date"},
		{"a date in another form", func(r *Record) { r.Date = "23.11.2026" }, "date"},
		{"no cores", func(r *Record) { r.Machine.Cores = 0 }, "machine.cores"},
		{"no command", func(r *Record) { r.Command = " " }, "command missing"},
		{"no rows", func(r *Record) { r.Rows = nil }, "no figures"},
		{"a row key that is no column", func(r *Record) { r.Rows = []Row{{"p99": 1.0}} }, `key "p99" is not a column`},
		{"a column twice", func(r *Record) { r.Columns = append(r.Columns, Column{Key: "sales"}) }, "repeated"},
		{"a nested value", func(r *Record) { r.Rows = []Row{{"sales": map[string]any{}}} }, "want a number, a string or a boolean"},
	} {
		r := ok
		r.Machine.Load = nil
		r.Columns = append([]Column(nil), ok.Columns...)
		tc.change(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%s) = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestAppendThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	a := record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0})
	b := record("2026-11-26T01:02Z", "b", Row{"strategy": "y", "sales": 2.5})
	for _, r := range []Record{a, b} {
		if err := Append(path, r); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	bad := record("2026-11-27", "c")
	if err := Append(path, bad); err == nil {
		t.Error("Append(a record without rows) = nil, want an error")
	}
	rs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Commit != "a" || rs[1].Commit != "b" || rs[1].Rows[0]["sales"] != 2.5 {
		t.Errorf("Read after two Appends = %+v", rs)
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	good, _ := json.Marshal(record("2026-11-25", "a", Row{"strategy": "x", "sales": 1.0}))
	for _, tc := range []struct{ second, want string }{
		{`{"date":"2026-11-25","commit":"","machine":{"cores":2},"command":"c","columns":[{"key":"k","title":"k"}],"rows":[{"k":1}],"colour":"red"}`, `x.jsonl:2: json: unknown field "colour"`},
		{`{"date":"2026-11-25","commit":"","machine":{"cores":2},"command":"c","columns":[{"key":"k","title":"k"}],"rows":[{"j":1}]}`, `x.jsonl:2: row 1: key "j" is not a column`},
		{`not json`, "x.jsonl:2:"},
	} {
		if err := os.WriteFile(path, []byte(string(good)+"\n"+tc.second+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(a file whose line 2 is %s) = %v, want an error with %q", tc.second, err, tc.want)
		}
	}
}

// loadtestJSON is what `loadtest --ceilings --runs 2 --json` writes for
// two strategies: marshalled from the load tester's own types, so that a
// renamed JSON field fails this test rather than a record.
func loadtestJSON(t *testing.T, withCeilings bool) []byte {
	t.Helper()
	res := func(run int, strategy string, ok int64, seconds, hotRow, serial, soldOut, healthz, p99 float64) load.Result {
		return load.Result{Run: run, Strategy: strategy, Safe: true, OK: ok, SoldOut: 10, Initial: ok, LedgerUnits: ok,
			Seconds: seconds, Throughput: float64(ok+10) / seconds, HotRowRate: hotRow, SerialRate: serial,
			SoldOutRate: soldOut, SoldOutHealthz: healthz, LatencyMs: load.Latency{P50: 1, P95: 2, P99: p99, Max: 4}, Verdict: "SAFE"}
	}
	rep := report.Report{
		StartedAt: "2026-11-29T08:30:05+01:00", Commit: "abc1234", Runs: 2,
		Results: []load.Result{
			res(1, "batch", 4000, 1, 1000, 0, 9000, 10000, 30),
			res(1, "redis", 400, 1, 800, 500, 8000, 10000, 800),
			res(2, "batch", 5000, 1, 1000, 0, 8000, 10000, 40),
			res(2, "redis", 300, 1, 600, 600, 9000, 10000, 900),
		},
	}
	if withCeilings {
		rep.Ceilings = &load.Ceilings{HotRow: 900.4, HotRowClients: 8, Redis: 51554, Healthz: 12674, ManyRows: 4298, ManyRowsProducts: 1000, ManyRowsClients: 32}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func convert(t *testing.T, kind string, data []byte) Record {
	t.Helper()
	k, err := KindNamed(kind)
	if err != nil {
		t.Fatal(err)
	}
	r, err := k.Convert(data)
	if err != nil {
		t.Fatalf("%s.Convert: %v", kind, err)
	}
	r.Machine, r.Command = Machine{Cores: 2}, "go run ./loadtest …"
	if err := r.Validate(); err != nil {
		t.Fatalf("%s.Convert gave an invalid record: %v", kind, err)
	}
	return r
}

func TestConvertTheLoadTestersJSON(t *testing.T) {
	data := loadtestJSON(t, true)

	hot := convert(t, "hot-product", data)
	if hot.Date != "2026-11-29T07:30Z" || hot.Commit != "abc1234" {
		t.Errorf("hot-product record: date %q, commit %q; want the run's start in UTC, 2026-11-29T07:30Z, and abc1234", hot.Date, hot.Commit)
	}
	if len(hot.Rows) != 4 || hot.Rows[0]["run"] != 1.0 || hot.Rows[0]["strategy"] != "batch" || hot.Rows[0]["req_per_s"] != 4010.0 || hot.Rows[3]["p99_ms"] != 900.0 {
		t.Errorf("hot-product rows = %v", hot.Rows)
	}

	b := convert(t, "batching", data)
	want := []Row{
		{"strategy": "batch", "runs": 2.0, "sales_per_s": 4500.0, "sales_range": "4000–5000", "hot_row_per_s": 1000.0,
			"x_hot_row": 4.5, "x_hot_row_runs": "4.00/5.00", "p99_ms": 35.0, "sold_out_per_s": 8500.0, "pct_healthz": 85.0, "pct_healthz_runs": "90/80"},
		{"strategy": "redis", "runs": 2.0, "sales_per_s": 350.0, "sales_range": "300–400", "hot_row_per_s": 700.0,
			"x_hot_row": 0.5, "x_hot_row_runs": "0.50/0.50", "serial_per_s": 550.0, "pct_serial": 65.0, "pct_serial_runs": "80/50",
			"p99_ms": 850.0, "sold_out_per_s": 8500.0, "pct_healthz": 85.0, "pct_healthz_runs": "80/90"},
	}
	if got, _ := json.Marshal(b.Rows); string(got) != mustJSON(t, want) {
		t.Errorf("batching rows =\n%s\nwant\n%s", got, mustJSON(t, want))
	}

	c := convert(t, "ceilings", data)
	if got := mustJSON(t, c.Rows); !strings.Contains(got, `"ceiling":"hot-row","per_s":900`) || !strings.Contains(got, `"ceiling":"many-rows","per_s":4298`) ||
		!strings.Contains(got, `"ceiling":"redis","per_s":51554`) || !strings.Contains(got, `"ceiling":"healthz","per_s":12674`) {
		t.Errorf("ceilings rows = %s", got)
	}

	m := convert(t, "many-products", data)
	if got := mustJSON(t, m.Rows); got != `[{"many_rows_tps":4298,"pct_many_rows":105,"runs":2,"sales_per_s":4500,"strategy":"batch"},{"many_rows_tps":4298,"pct_many_rows":8,"runs":2,"sales_per_s":350,"strategy":"redis"}]` {
		t.Errorf("many-products rows = %s", got)
	}
}

func TestConvertRefusesARunWithoutWhatItNeeds(t *testing.T) {
	noCeilings := loadtestJSON(t, false)
	for _, kind := range []string{"batching", "ceilings", "many-products"} {
		k, _ := KindNamed(kind)
		if _, err := k.Convert(noCeilings); err == nil || !strings.Contains(err.Error(), "--ceilings") {
			t.Errorf("%s.Convert(a run without --ceilings) = %v, want an error naming --ceilings", kind, err)
		}
	}
	k, _ := KindNamed("hot-product")
	for _, data := range []string{`{"started_at":"2026-11-29T08:00:00Z","results":[]}`, `{"started_at":"yesterday","results":[{"strategy":"x"}]}`, `[`} {
		if _, err := k.Convert([]byte(data)); err == nil {
			t.Errorf("hot-product.Convert(%s) = nil error", data)
		}
	}
	if _, err := KindNamed("speed"); err == nil || !strings.Contains(err.Error(), "want one of hot-product, batching") {
		t.Errorf(`KindNamed("speed") = %v, want an error listing the kinds`, err)
	}
}

func TestConvertTheMatrixJSON(t *testing.T) {
	m := report.Matrix{
		StartedAt: "2026-11-28T21:22:00Z", Runs: 3,
		Strategies:   []report.StrategyInfo{{Name: "none", Safe: false}, {Name: "redis", Safe: true}},
		Faults:       []string{"replica-kill", "clock-jump"},
		FaultSeconds: []float64{61, 30.4},
		Cells: []report.Cell{
			{Strategy: "none", Fault: "replica-kill", Runs: 3, Kept: 0},
			{Strategy: "none", Fault: "clock-jump", NotApplicable: "keeps no lock"},
			{Strategy: "redis", Fault: "replica-kill", Runs: 3, Kept: 3},
			{Strategy: "redis", Fault: "clock-jump", Runs: 1, Kept: 1, NotStruck: "2 runs missed"},
		},
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r := convert(t, "fault-matrix", data)
	want := `[{"clock-jump":"n/a","replica-kill":"0/3","safe":false,"strategy":"none"},{"clock-jump":"DID NOT STRIKE (1/1)","replica-kill":"3/3","safe":true,"strategy":"redis"}]`
	if got := mustJSON(t, r.Rows); got != want || r.Series != "matrix" || r.Date != "2026-11-28T21:22Z" {
		t.Errorf("fault-matrix record: series %q, date %q, rows\n%s\nwant series matrix, rows\n%s", r.Series, r.Date, got, want)
	}
	if !strings.Contains(r.Setup, "1m31s in all (replica-kill 1m1s, clock-jump 30s)") {
		t.Errorf("fault-matrix setup = %q, want each fault's time", r.Setup)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
