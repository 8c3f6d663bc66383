package results

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is a kind of record that a load tester run can be turned into: the
// file it is appended to and how its rows are taken from the run's JSON.
type Kind struct {
	// File is the records' file under docs/results/.
	File string
	// From says which command's --json it reads.
	From string
	// Does says what the rows hold.
	Does    string
	convert func([]byte) (Record, error)
}

// Kinds is every kind `loadtest results record` and `add` know, by name
// (the file without .jsonl).
var Kinds = []Kind{
	{"hot-product.jsonl", "loadtest", "one row per strategy and run: answers, final stock, ledger, oversold, req/s, latency, verdict", fromHotProduct},
	{"batching.jsonl", "loadtest --ceilings", "per strategy, the median over its runs: sales/s, × the hot row measured before it, % of its serial ceiling, p99, sold-out 409/s and % of /healthz", fromBatching},
	{"ceilings.jsonl", "loadtest --ceilings", "the ceilings measured at the start: the hot row, many rows (with --products), Redis, GET /healthz", fromCeilings},
	{"many-products.jsonl", "loadtest --products N --ceilings", "per strategy, the median over its runs: sales/s and % of the many-row ceiling", fromManyProducts},
	{"fault-matrix.jsonl", "loadtest faults", "one row per strategy: kept/runs per fault, n/a, or DID NOT STRIKE", fromMatrix},
	{"cpu.jsonl", "loadtest cpu", "per kind of request (GET /healthz, a sold-out 409, a sale by each strategy): answers/s and the µs of CPU per answer of each group of processes, × /healthz", fromCPU},
}

// KindNamed returns the kind whose file is name + ".jsonl".
func KindNamed(name string) (Kind, error) {
	for _, k := range Kinds {
		if k.File == name+".jsonl" || k.File == name {
			return k, nil
		}
	}
	var names []string
	for _, k := range Kinds {
		names = append(names, strings.TrimSuffix(k.File, ".jsonl"))
	}
	return Kind{}, fmt.Errorf("unknown kind %q (want one of %s)", name, strings.Join(names, ", "))
}

// Convert turns what the kind's command wrote with --json into a record:
// its date, commit and rows. The caller adds the machine and the command.
func (k Kind) Convert(data []byte) (Record, error) {
	r, err := k.convert(data)
	if err != nil {
		return Record{}, fmt.Errorf("results: %s from %s --json: %w", strings.TrimSuffix(k.File, ".jsonl"), k.From, err)
	}
	return r, nil
}

// loadReport is the part of `loadtest --json` (internal/report.Report)
// that records take; the field names are that JSON's contract.
type loadReport struct {
	StartedAt string `json:"started_at"`
	Commit    string `json:"commit"`
	Runs      int    `json:"runs"`
	Products  int    `json:"products"`
	Ceilings  *struct {
		HotRow           float64            `json:"hot_row_tps"`
		HotRowClients    int                `json:"hot_row_clients"`
		Redis            float64            `json:"redis_round_trips_per_s"`
		Healthz          float64            `json:"healthz_per_s"`
		Serial           map[string]float64 `json:"serial_sales_per_s"`
		Seconds          float64            `json:"seconds_each"`
		ManyRows         float64            `json:"many_rows_tps"`
		ManyRowsProducts int                `json:"many_rows_products"`
		ManyRowsClients  int                `json:"many_rows_clients"`
	} `json:"ceilings"`
	Results []loadResult `json:"results"`
}

type loadResult struct {
	Run            int     `json:"run"`
	Strategy       string  `json:"strategy"`
	Safe           bool    `json:"safe"`
	OK             int64   `json:"ok_2xx"`
	SoldOut        int64   `json:"sold_out_409"`
	Unavailable    int64   `json:"unavailable_503"`
	FinalStock     int64   `json:"final_stock"`
	LedgerUnits    int64   `json:"ledger_units"`
	Oversold       int64   `json:"oversold"`
	Seconds        float64 `json:"seconds"`
	Throughput     float64 `json:"throughput_rps"`
	HotRowRate     float64 `json:"hot_row_tps"`
	SerialRate     float64 `json:"serial_sales_per_s"`
	SoldOutRate    float64 `json:"sold_out_per_s"`
	SoldOutHealthz float64 `json:"sold_out_healthz_per_s"`
	LatencyMs      struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	} `json:"latency_ms"`
	Verdict string `json:"verdict"`
}

// sales is the run's sales per second, as the load tester's ceilings
// table counts them: 2xx over the run's length.
func (r loadResult) sales() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.OK) / r.Seconds
}

func decodeLoad(data []byte) (loadReport, Record, error) {
	var rep loadReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, Record{}, err
	}
	if len(rep.Results) == 0 {
		return rep, Record{}, fmt.Errorf("no results in it")
	}
	date, err := utcMinute(rep.StartedAt)
	if err != nil {
		return rep, Record{}, err
	}
	return rep, Record{Date: date, Commit: rep.Commit}, nil
}

// utcMinute is an RFC 3339 time as a record's date.
func utcMinute(s string) (string, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return "", fmt.Errorf("started_at %q: %w", s, err)
	}
	return t.UTC().Format(dateLayouts[0]), nil
}

func fromHotProduct(data []byte) (Record, error) {
	rep, rec, err := decodeLoad(data)
	if err != nil {
		return rec, err
	}
	multi := slices.ContainsFunc(rep.Results, func(r loadResult) bool { return r.Run > 1 })
	if multi {
		rec.Columns = append(rec.Columns, Column{Key: "run", Title: "run"})
	}
	rec.Columns = append(rec.Columns,
		Column{Key: "strategy", Title: "strategy", Code: true}, Column{Key: "safe", Title: "safe?"},
		Column{Key: "ok_2xx", Title: "2xx"}, Column{Key: "sold_out_409", Title: "409"}, Column{Key: "unavailable_503", Title: "503"},
		Column{Key: "final_stock", Title: "final"}, Column{Key: "ledger_units", Title: "ledger"}, Column{Key: "oversold", Title: "oversold"},
		Column{Key: "req_per_s", Title: "req/s"}, Column{Key: "p50_ms", Title: "p50 ms"}, Column{Key: "p95_ms", Title: "p95 ms"},
		Column{Key: "p99_ms", Title: "p99 ms"}, Column{Key: "max_ms", Title: "max ms"}, Column{Key: "verdict", Title: "verdict"})
	for _, r := range rep.Results {
		row := Row{
			"strategy": r.Strategy, "safe": r.Safe, "ok_2xx": f(r.OK), "sold_out_409": f(r.SoldOut), "unavailable_503": f(r.Unavailable),
			"final_stock": f(r.FinalStock), "ledger_units": f(r.LedgerUnits), "oversold": f(r.Oversold),
			"req_per_s": math.Round(r.Throughput), "p50_ms": round(r.LatencyMs.P50, 1), "p95_ms": round(r.LatencyMs.P95, 1),
			"p99_ms": round(r.LatencyMs.P99, 1), "max_ms": round(r.LatencyMs.Max, 1), "verdict": r.Verdict,
		}
		if multi {
			row["run"] = float64(r.Run)
		}
		rec.Rows = append(rec.Rows, row)
	}
	return rec, nil
}

func fromBatching(data []byte) (Record, error) {
	rep, rec, err := decodeLoad(data)
	if err != nil {
		return rec, err
	}
	if rep.Ceilings == nil {
		return rec, fmt.Errorf("no ceilings in it: run the load tester with --ceilings")
	}
	rec.Columns = []Column{
		{Key: "strategy", Title: "strategy", Code: true}, {Key: "runs", Title: "runs"},
		{Key: "sales_per_s", Title: "sales/s"}, {Key: "sales_range", Title: "sales/s, runs"},
		{Key: "hot_row_per_s", Title: "hot row/s before it"}, {Key: "x_hot_row", Title: "× hot row"}, {Key: "x_hot_row_runs", Title: "× hot row, runs"},
		{Key: "serial_per_s", Title: "serial/s"}, {Key: "pct_serial", Title: "% of serial"}, {Key: "pct_serial_runs", Title: "% of serial, runs"},
		{Key: "p99_ms", Title: "p99 ms"}, {Key: "sold_out_per_s", Title: "sold-out 409/s"},
		{Key: "pct_healthz", Title: "% of /healthz beside it"}, {Key: "pct_healthz_runs", Title: "% of /healthz, runs"},
	}
	for _, name := range strategyOrder(rep.Results) {
		var sales, hot, times, serial, ofSerial, p99, soldOut, ofHealthz []float64
		for _, r := range rep.Results {
			if r.Strategy != name || r.Seconds <= 0 {
				continue
			}
			s := r.sales()
			sales, hot, serial, p99 = append(sales, s), append(hot, r.HotRowRate), append(serial, r.SerialRate), append(p99, r.LatencyMs.P99)
			soldOut = append(soldOut, r.SoldOutRate)
			times = append(times, ratio(s, r.HotRowRate))
			ofSerial = append(ofSerial, 100*ratio(s, r.SerialRate))
			if r.SoldOutRate > 0 {
				ofHealthz = append(ofHealthz, 100*ratio(r.SoldOutRate, r.SoldOutHealthz))
			} else {
				ofHealthz = append(ofHealthz, 0)
			}
		}
		if len(sales) == 0 {
			continue
		}
		row := Row{"strategy": name, "runs": float64(len(sales)), "sales_per_s": math.Round(median(sales))}
		if len(sales) > 1 {
			row["sales_range"] = fmt.Sprintf("%.0f–%.0f", slices.Min(sales), slices.Max(sales))
		}
		set := func(key string, v float64, places int) {
			if v > 0 {
				row[key] = round(v, places)
			}
		}
		set("hot_row_per_s", median(hot), 0)
		set("x_hot_row", median(times), 2)
		set("serial_per_s", median(serial), 0)
		set("pct_serial", median(ofSerial), 0)
		set("p99_ms", median(p99), 0)
		set("sold_out_per_s", median(soldOut), 0)
		set("pct_healthz", median(ofHealthz), 0)
		// Each run's figure beside the median, as the load tester prints
		// them: the spread says how far a median can be trusted.
		each := func(key string, v []float64, places int) {
			if len(v) < 2 || slices.Max(v) <= 0 {
				return
			}
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = strconv.FormatFloat(x, 'f', places, 64)
			}
			row[key] = strings.Join(parts, "/")
		}
		each("x_hot_row_runs", times, 2)
		each("pct_serial_runs", ofSerial, 0)
		each("pct_healthz_runs", ofHealthz, 0)
		rec.Rows = append(rec.Rows, row)
	}
	return rec, nil
}

func fromCeilings(data []byte) (Record, error) {
	rep, rec, err := decodeLoad(data)
	if err != nil {
		return rec, err
	}
	c := rep.Ceilings
	if c == nil {
		return rec, fmt.Errorf("no ceilings in it: run the load tester with --ceilings")
	}
	rec.Columns = []Column{{Key: "ceiling", Title: "ceiling"}, {Key: "per_s", Title: "per second"}, {Key: "what", Title: "what is measured"}}
	add := func(name string, v float64, what string) {
		if v > 0 {
			rec.Rows = append(rec.Rows, Row{"ceiling": name, "per_s": math.Round(v), "what": what})
		}
	}
	add("hot-row", c.HotRow, fmt.Sprintf("one-sale transactions on one stock row straight to Postgres, %d clients", c.HotRowClients))
	add("many-rows", c.ManyRows, fmt.Sprintf("the same on a product drawn uniformly from %d, %d clients", c.ManyRowsProducts, c.ManyRowsClients))
	add("redis", c.Redis, "Redis round trips")
	add("healthz", c.Healthz, "GET /healthz through nginx")
	if len(rec.Rows) == 0 {
		return rec, fmt.Errorf("its ceilings are all zero")
	}
	return rec, nil
}

func fromManyProducts(data []byte) (Record, error) {
	rep, rec, err := decodeLoad(data)
	if err != nil {
		return rec, err
	}
	if rep.Ceilings == nil || rep.Ceilings.ManyRows <= 0 {
		return rec, fmt.Errorf("no many-row ceiling in it: run the load tester with --products N --ceilings")
	}
	rec.Columns = []Column{
		{Key: "strategy", Title: "strategy", Code: true}, {Key: "runs", Title: "runs"}, {Key: "sales_per_s", Title: "sales/s"},
		{Key: "many_rows_tps", Title: "many rows, tx/s"}, {Key: "pct_many_rows", Title: "% of many rows"},
	}
	for _, name := range strategyOrder(rep.Results) {
		var sales []float64
		for _, r := range rep.Results {
			if r.Strategy == name && r.Seconds > 0 {
				sales = append(sales, r.sales())
			}
		}
		if len(sales) == 0 {
			continue
		}
		s := median(sales)
		rec.Rows = append(rec.Rows, Row{"strategy": name, "runs": float64(len(sales)), "sales_per_s": math.Round(s),
			"many_rows_tps": math.Round(rep.Ceilings.ManyRows), "pct_many_rows": math.Round(100 * s / rep.Ceilings.ManyRows)})
	}
	return rec, nil
}

// matrixReport is the part of `loadtest faults --json`
// (internal/report.Matrix) that records take.
type matrixReport struct {
	StartedAt  string `json:"started_at"`
	Runs       int    `json:"runs"`
	Strategies []struct {
		Name string `json:"name"`
		Safe bool   `json:"safe"`
	} `json:"strategies"`
	Faults       []string  `json:"faults"`
	FaultSeconds []float64 `json:"fault_seconds"`
	Cells        []struct {
		Strategy      string `json:"strategy"`
		Fault         string `json:"fault"`
		Runs          int    `json:"runs"`
		Kept          int    `json:"kept"`
		NotApplicable string `json:"not_applicable"`
		NotStruck     string `json:"not_struck"`
	} `json:"cells"`
}

func fromMatrix(data []byte) (Record, error) {
	var m matrixReport
	if err := json.Unmarshal(data, &m); err != nil {
		return Record{}, err
	}
	if len(m.Cells) == 0 {
		return Record{}, fmt.Errorf("no cells in it")
	}
	date, err := utcMinute(m.StartedAt)
	if err != nil {
		return Record{}, err
	}
	// The matrix file also holds other shapes (one fault's figures): its
	// strategy × fault tables are the series "matrix".
	rec := Record{Date: date, Series: "matrix", Columns: []Column{{Key: "strategy", Title: "strategy", Code: true}, {Key: "safe", Title: "safe?"}}}
	for _, fault := range m.Faults {
		rec.Columns = append(rec.Columns, Column{Key: fault, Title: fault})
	}
	for _, s := range m.Strategies {
		row := Row{"strategy": s.Name, "safe": s.Safe}
		for _, c := range m.Cells {
			if c.Strategy != s.Name {
				continue
			}
			switch {
			case c.NotApplicable != "":
				row[c.Fault] = "n/a"
			case c.NotStruck != "":
				row[c.Fault] = fmt.Sprintf("DID NOT STRIKE (%d/%d)", c.Kept, c.Runs)
			default:
				row[c.Fault] = fmt.Sprintf("%d/%d", c.Kept, c.Runs)
			}
		}
		rec.Rows = append(rec.Rows, row)
	}
	if len(m.FaultSeconds) == len(m.Faults) {
		var parts []string
		total := 0.0
		for i, s := range m.FaultSeconds {
			parts = append(parts, fmt.Sprintf("%s %s", m.Faults[i], time.Duration(s*float64(time.Second)).Round(time.Second)))
			total += s
		}
		rec.Setup = fmt.Sprintf("%d runs per cell; the faults' cells took %s in all (%s)", m.Runs,
			time.Duration(total*float64(time.Second)).Round(time.Second), strings.Join(parts, ", "))
	}
	return rec, nil
}

// strategyOrder is the strategies of rs in the order they first ran.
func strategyOrder(rs []loadResult) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.Strategy) {
			out = append(out, r.Strategy)
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

func f(n int64) float64 { return float64(n) }
