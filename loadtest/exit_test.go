package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"inventory/internal/history"
	"inventory/internal/load"
	"inventory/internal/report"
	"inventory/internal/testenv"
	"inventory/internal/verdict"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// fakeFleet speaks the inventory API with strategies whose behaviour is
// fixed, so the load tester's verdicts and exit status can be checked
// against known outcomes. The real service is exercised in e2e_test.go.
//
// Strategies (all claim to be safe but racy):
//   - honest sells while stock remains, else 409;
//   - oversells never checks;
//   - busy always answers 503 lock-timeout;
//   - racy (unsafe) oversells every other time once sold out;
//   - breaching is honest, but its sold-out answers and every 4th attempt
//     are lock breaches (409 / 503 lock-lost with lock_breach, nothing sold);
//   - unsure is honest, but every 3rd attempt commits and answers 503
//     outcome-unknown, and every 5th answers it without committing;
//   - phantom answers 2xx without a ledger row on its 2nd attempt;
//   - ghost sells on its 2nd attempt but answers 409;
//   - stale is honest, but its first sale after a restock lands in the
//     previous round, as a lock that missed the restock would;
//   - counter sells from its own per-round counter (like a Redis counter)
//     and writes unguarded: consistent alone, oversells mixed with others;
//   - laggard is honest, but its first sale after a restock is refused 409
//     sold-out from its memory of the old round, as a replica that has not
//     heard of the restock did (issue 23, item 1).
type fakeFleet struct {
	mu                sync.Mutex
	qty, round        int64
	rounds            map[int64]*fakeRound
	counter           int64            // counter's units left this round
	attempts          map[string]int64 // sale attempts per strategy
	staleRound        int64            // the round stale still believes in
	laggardRound      int64            // the round laggard last heard of
	def               string           // the fleet default
	defaults          []string         // every PUT /strategy, in order
	namedWithoutToken int              // ?strategy= sales without the admin token
	byPath            int              // sales sent as POST /products/{id}/sale
}

type fakeRound struct{ initial, sold, sales int64 }

const fakeStrategies = `[{"name":"honest","safe":true},{"name":"oversells","safe":true},{"name":"busy","safe":true},{"name":"racy","safe":false},` +
	`{"name":"breaching","safe":true},{"name":"unsure","safe":true},{"name":"phantom","safe":true},{"name":"ghost","safe":true},` +
	`{"name":"stale","safe":true},{"name":"counter","safe":true},{"name":"laggard","safe":true}]`

func newFakeFleet(def string) *fakeFleet {
	return &fakeFleet{rounds: map[int64]*fakeRound{}, attempts: map[string]int64{}, def: def}
}

func (f *fakeFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("X-Instance", "fake-1")
	admin := r.Header.Get("Authorization") == "Bearer t"
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/healthz":
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	case r.Method == http.MethodGet && r.URL.Path == "/strategies":
		_, _ = w.Write([]byte(fakeStrategies))
	case r.Method == http.MethodGet && r.URL.Path == "/strategy":
		_ = json.NewEncoder(w).Encode(map[string]string{"strategy": f.def})
	case r.Method == http.MethodPut && r.URL.Path == "/strategy":
		if !admin {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var body struct{ Strategy string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.def = body.Strategy
		f.defaults = append(f.defaults, body.Strategy)
		_ = json.NewEncoder(w).Encode(body)
	case r.Method == http.MethodPut && len(parts) == 2 && parts[0] == "products":
		if !admin {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var body struct{ Quantity int64 }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.round++
		f.qty, f.counter = body.Quantity, body.Quantity
		f.rounds[f.round] = &fakeRound{initial: body.Quantity}
		_ = json.NewEncoder(w).Encode(f.product())
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "products":
		_ = json.NewEncoder(w).Encode(f.product())
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "products" && parts[2] == "rounds":
		n, _ := strconv.ParseInt(parts[3], 10, 64)
		rd, ok := f.rounds[n]
		if !ok {
			http.Error(w, "no such round", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"round": n, "initial": rd.initial, "sold": rd.sold, "sales": rd.sales, "current": n == f.round})
	case r.Method == http.MethodPost && (r.URL.Path == "/sale" || len(parts) == 3 && parts[0] == "products" && parts[2] == "sale"):
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.URL.Path != "/sale" {
			if _, ok := body["product_id"]; ok {
				problem(w, http.StatusBadRequest, "malformed-request", false)
				return
			}
			f.byPath++
		}
		s := f.def
		if named, ok := r.URL.Query()["strategy"]; ok {
			if !admin {
				f.namedWithoutToken++
				problem(w, http.StatusUnauthorized, "unauthorized", false)
				return
			}
			s = named[0]
		}
		f.sell(w, s)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeFleet) product() map[string]int64 {
	rd := f.rounds[f.round]
	return map[string]int64{"quantity": f.qty, "initial": rd.initial, "sold": rd.sold, "sales": rd.sales, "round": f.round}
}

func (f *fakeFleet) sell(w http.ResponseWriter, s string) {
	f.attempts[s]++
	k := f.attempts[s]
	record := func(round int64) {
		f.rounds[round].sold++
		f.rounds[round].sales++
		if round == f.round {
			f.qty--
		}
	}
	ok := func(round int64) {
		_ = json.NewEncoder(w).Encode(map[string]any{"round": round, "strategy": s, "remaining": f.qty})
	}
	switch s {
	case "busy":
		problem(w, http.StatusServiceUnavailable, "lock-timeout", false)
	case "oversells":
		record(f.round)
		ok(f.round)
	case "racy":
		if f.qty < 1 && f.rounds[f.round].sold%2 == 0 {
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		record(f.round)
		ok(f.round)
	case "breaching":
		switch {
		case f.qty < 1:
			problem(w, http.StatusConflict, "sold-out", true)
		case k%4 == 0:
			problem(w, http.StatusServiceUnavailable, "lock-lost", true)
		default:
			record(f.round)
			ok(f.round)
		}
	case "unsure":
		switch {
		case f.qty < 1:
			problem(w, http.StatusConflict, "sold-out", false)
		case k%3 == 0:
			record(f.round)
			problem(w, http.StatusServiceUnavailable, "outcome-unknown", false)
		case k%5 == 0:
			problem(w, http.StatusServiceUnavailable, "outcome-unknown", false)
		default:
			record(f.round)
			ok(f.round)
		}
	case "phantom", "ghost":
		switch {
		case f.qty < 1:
			problem(w, http.StatusConflict, "sold-out", false)
		case k == 2 && s == "phantom":
			f.qty-- // stock goes down, the ledger never hears of it
			f.rounds[f.round].sold++
			ok(f.round)
		case k == 2 && s == "ghost":
			record(f.round)
			problem(w, http.StatusConflict, "sold-out", false)
		default:
			record(f.round)
			ok(f.round)
		}
	case "stale":
		switch {
		case f.staleRound != 0 && f.staleRound != f.round:
			old := f.staleRound
			f.staleRound = f.round
			record(old)
			ok(old)
		case f.qty < 1:
			f.staleRound = f.round
			problem(w, http.StatusConflict, "sold-out", false)
		default:
			f.staleRound = f.round
			record(f.round)
			ok(f.round)
		}
	case "laggard":
		if f.laggardRound != 0 && f.laggardRound != f.round {
			f.laggardRound = f.round
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		f.laggardRound = f.round
		if f.qty < 1 {
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		record(f.round)
		ok(f.round)
	case "counter":
		if f.counter < 1 {
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		f.counter--
		record(f.round)
		ok(f.round)
	default: // honest
		if f.qty < 1 {
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		record(f.round)
		ok(f.round)
	}
}

func problem(w http.ResponseWriter, status int, slug string, breach bool) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	p := map[string]any{"type": problemTypePrefix + slug, "status": status}
	if breach {
		p["lock_breach"] = true
	}
	_ = json.NewEncoder(w).Encode(p)
}

const problemTypePrefix = "urn:inventory:problem:"

// fakeRun runs the load tester against fake with args (--url, the token and
// --json - added) and returns the error, the report and the table.
func fakeRun(t *testing.T, fake *fakeFleet, args ...string) (error, report.Report, string) {
	t.Helper()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	args = append([]string{"--url", srv.URL, "--admin-token", "t", "--json", "-"}, args...)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	var rep report.Report
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil {
		t.Fatalf("run(%q) = %v; JSON = %v, %s\n%s", args, err, jerr, stdout.String(), stderr.String())
	}
	return err, rep, stderr.String()
}

func TestRunVerdictsAndExitStatus(t *testing.T) {
	tests := []struct {
		strategy     string
		wantErr      error
		wantVerdict  string
		wantBreaches int64
		wantUnknown  int64
		wantHistory  history.Verdict
	}{
		{"honest", nil, verdict.Safe, 0, 0, history.Linearizable},
		{"oversells", errBroken, verdict.Broken, 0, 0, history.NotLinearizable},
		{"busy", nil, verdict.Undersold, 0, 0, history.Linearizable},   // reported, but a capacity limit does not fail the run
		{"racy", nil, verdict.Oversold, 0, 0, history.NotLinearizable}, // unsafe strategies are expected to oversell
		// 9 attempts for 5 units: #4 a breach 503, #7–9 breach 409s.
		{"breaching", nil, verdict.Safe, 4, 0, history.Linearizable}, // the lock broke, the database held: still SAFE
		{"unsure", nil, verdict.Safe, 0, 3, history.Linearizable},    // #3, #5, #6 unknown; #3 and #6 did sell
		// A 2xx without its ledger row: the stock fell, so its answers are
		// consistent; the ledger check catches it.
		{"phantom", errBroken, verdict.Broken, 0, 0, history.Linearizable},
		{"ghost", errBroken, verdict.Broken, 0, 0, history.NotLinearizable}, // sold, but answered sold out
	}
	for _, tt := range tests {
		fake := newFakeFleet("honest")
		args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", tt.strategy}
		err, rep, table := fakeRun(t, fake, args...)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("run(%q) = %v, want %v", args, err, tt.wantErr)
		}
		if len(rep.Results) != 1 {
			t.Fatalf("run(%q): %d results, want 1", args, len(rep.Results))
		}
		res := rep.Results[0]
		if res.Verdict != tt.wantVerdict || !strings.Contains(table, tt.wantVerdict) {
			t.Errorf("run(%q) verdict %s (%q), want %s in the JSON and the table:\n%s", args, res.Verdict, res.Reasons, tt.wantVerdict, table)
		}
		if res.Breaches != tt.wantBreaches || res.Unknown != tt.wantUnknown {
			t.Errorf("run(%q) breaches %d unknown %d, want %d and %d", args, res.Breaches, res.Unknown, tt.wantBreaches, tt.wantUnknown)
		}
		if rep.Failed != (tt.wantErr != nil) {
			t.Errorf("run(%q) report.failed = %v, want %v", args, rep.Failed, tt.wantErr != nil)
		}
		if res.History == nil || res.History.Verdict != string(tt.wantHistory) || res.StateFrom != load.FromAPI {
			t.Errorf("run(%q) history %+v read from %q, want %s read from the API", args, res.History, res.StateFrom, tt.wantHistory)
		}
		if fake.namedWithoutToken > 0 {
			t.Errorf("run(%q) sent %d sales naming ?strategy= without the admin token", args, fake.namedWithoutToken)
		}
	}
}

// TestByProductSellsThroughTheProductPath: --by-product sends every sale as
// POST /products/{id}/sale with the product only in the path.
func TestByProductSellsThroughTheProductPath(t *testing.T) {
	fake := newFakeFleet("honest")
	args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", "honest", "--by-product"}
	err, rep, _ := fakeRun(t, fake, args...)
	if err != nil || len(rep.Results) != 1 || rep.Results[0].Verdict != verdict.Safe {
		t.Fatalf("run(%q) = %v, %+v; want one SAFE row", args, err, rep.Results)
	}
	if fake.byPath != 9 {
		t.Errorf("run(%q) sent %d of 9 sales by product path, want all", args, fake.byPath)
	}
}

// TestCeilings: --ceilings measures /healthz through the target (Postgres
// and Redis only when given), and each one-strategy row that ended at
// exactly 0 gets its sold-out answers per second, printed against them.
func TestCeilings(t *testing.T) {
	fake := newFakeFleet("honest")
	args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", "honest,racy", "--ceilings", "--ceiling-time", "200ms"}
	err, rep, table := fakeRun(t, fake, args...)
	if err != nil {
		t.Fatalf("run(%q) = %v", args, err)
	}
	if rep.Ceilings == nil || rep.Ceilings.Healthz <= 0 || rep.Ceilings.HotRow != 0 || rep.Ceilings.Redis != 0 {
		t.Fatalf("run(%q) ceilings = %+v, want /healthz measured and no Postgres or Redis figure (no URLs given)", args, rep.Ceilings)
	}
	for _, res := range rep.Results {
		if sold := res.SoldOutRate > 0; sold != (res.Strategy == "honest") {
			t.Errorf("run(%q) row %s sold-out rate %.0f/s, want one only for the row that ended sold out (racy oversold)", args, res.Strategy, res.SoldOutRate)
		}
		if res.HotRowRate != 0 {
			t.Errorf("run(%q) row %s hot row beside it %.0f/s, want none (no Postgres URL given)", args, res.Strategy, res.HotRowRate)
		}
		if beside := res.SoldOutHealthz > 0; beside != (res.SoldOutRate > 0) {
			t.Errorf("run(%q) row %s /healthz beside its sold-out phase %.0f/s, want one exactly when the phase ran", args, res.Strategy, res.SoldOutHealthz)
		}
	}
	for _, want := range []string{"ceilings, measured in this run", "GET /healthz", "sold-out 409/s", "% of healthz"} {
		if !strings.Contains(table, want) {
			t.Errorf("run(%q) output lacks %q:\n%s", args, want, table)
		}
	}
}

// TestCeilingsMedians: with several runs, each strategy's figures are
// printed per run and as medians over its runs.
func TestCeilingsMedians(t *testing.T) {
	fake := newFakeFleet("honest")
	args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", "honest", "--ceilings", "--ceiling-time", "100ms", "--runs", "3"}
	err, rep, table := fakeRun(t, fake, args...)
	if err != nil {
		t.Fatalf("run(%q) = %v", args, err)
	}
	var rates []float64
	for _, res := range rep.Results {
		rates = append(rates, res.SoldOutRate)
	}
	slices.Sort(rates)
	want := "honest        3 "
	_, medians, found := strings.Cut(table, "medians over the runs")
	if !found || !strings.Contains(medians, want) || !strings.Contains(medians, fmt.Sprintf(" %.0f ", rates[1])) {
		t.Errorf("run(%q) medians, want a line %q… with the middle sold-out rate %.0f of %v:\n%s", args, want, rates[1], rates, table)
	}
}

// TestCeilingsBudgets: with --ceilings the report prints issue 38's
// budgets, each the median over --runs against the ceilings measured in
// the run, and writes them in the JSON report: here the fastest safe
// strategy's sales against GET /healthz and its sold-out answers against
// the /healthz beside them (no Postgres given: no hot-row budget).
func TestCeilingsBudgets(t *testing.T) {
	fake := newFakeFleet("honest")
	args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", "honest,racy", "--ceilings", "--ceiling-time", "100ms", "--runs", "3"}
	err, rep, table := fakeRun(t, fake, args...)
	if err != nil {
		t.Fatalf("run(%q) = %v", args, err)
	}
	if rep.Ceilings == nil {
		t.Fatalf("run(%q): no ceilings in the JSON report", args)
	}
	got := map[string]load.Budget{}
	for _, b := range rep.Ceilings.Budgets {
		got[b.Name+" "+b.Strategy] = b
	}
	for _, want := range []string{"sales/s ÷ GET /healthz (fastest safe) honest", "sold-out 409/s ÷ GET /healthz honest"} {
		b, ok := got[want]
		if !ok || b.Runs != 3 || b.Measured <= 0 || b.Target <= 0 {
			t.Errorf("run(%q) JSON budget %q = %+v (found %v), want one measured over 3 runs", args, want, b, ok)
		}
	}
	if len(got) != 2 {
		t.Errorf("run(%q) JSON budgets = %+v, want those 2 (racy is unsafe; no hot row without Postgres)", args, rep.Ceilings.Budgets)
	}
	_, block, found := strings.Cut(table, "budgets (issue 38)")
	if !found {
		t.Fatalf("run(%q) prints no budgets block:\n%s", args, table)
	}
	for _, want := range []string{"measured", "target", "verdict", "sales/s ÷ GET /healthz (fastest safe)", "sold-out 409/s ÷ GET /healthz", "≥ 50%", "≥ 90%"} {
		if !strings.Contains(block, want) {
			t.Errorf("run(%q) budgets block lacks %q:\n%s", args, want, block)
		}
	}
	t.Logf("the block:%s", block)
}

// TestNoBudgetsWithoutCeilings: without --ceilings nothing is judged.
func TestNoBudgetsWithoutCeilings(t *testing.T) {
	args := []string{"--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", "honest"}
	err, rep, table := fakeRun(t, newFakeFleet("honest"), args...)
	if err != nil || rep.Ceilings != nil || strings.Contains(table, "budgets (issue 38)") {
		t.Errorf("run(%q) = %v, ceilings %+v; want no ceilings and no budgets block:\n%s", args, err, rep.Ceilings, table)
	}
}

// TestCeilingsKeepTheBooks: the ceilings sell their own products with the
// minimal one-sale transaction, which leaves the round's totals out; once
// measured, every ceiling product's round totals match its ledger and its
// stock (what GET /products/{id} reads), and the invariant watchdog, which
// checks each touched product every second from the ledger, opened no
// circuit on any of them while the totals lagged.
func TestCeilingsKeepTheBooks(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startE2EFleet(ctx, t)
	c := load.NewClient(f.URL, f.AdminToken, 4, nil)
	defer c.Close()
	// Longer than the watchdog's 1 s interval: it checks the products
	// while they sell.
	if _, err := load.MeasureCeilings(ctx, c, f.PostgresURL, "", 4, 20, 1500*time.Millisecond); err != nil {
		t.Fatalf("load.MeasureCeilings: %v", err)
	}
	conn, err := pgx.Connect(ctx, f.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT s.product_id, s.initial - s.quantity, coalesce(t.units, 0), coalesce(t.sales, 0),
		       (SELECT coalesce(sum(quantity), 0) FROM sales l WHERE l.product_id = s.product_id AND l.round = s.round),
		       (SELECT count(*) FROM sales l WHERE l.product_id = s.product_id AND l.round = s.round)
		FROM stock s LEFT JOIN round_totals t ON t.product_id = s.product_id AND t.round = s.round
		WHERE s.product_id = 'ceiling-hot-row' OR s.product_id LIKE 'ceiling-many-%'`)
	if err != nil {
		t.Fatal(err)
	}
	products, sold := 0, int64(0)
	for rows.Next() {
		var id string
		var taken, units, sales, ledgerUnits, ledgerRows int64
		if err := rows.Scan(&id, &taken, &units, &sales, &ledgerUnits, &ledgerRows); err != nil {
			t.Fatal(err)
		}
		products++
		sold += ledgerUnits
		if taken != ledgerUnits || units != ledgerUnits || sales != ledgerRows {
			t.Errorf("%s: initial - quantity = %d, round totals %d units in %d sales, ledger %d units in %d rows; want all equal", id, taken, units, sales, ledgerUnits, ledgerRows)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if products != 21 || sold == 0 {
		t.Errorf("read %d ceiling products with %d units sold, want 21 (the hot row and 20 of many rows) with sales", products, sold)
	}
	var open int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM circuits WHERE product_id LIKE 'ceiling-%'`).Scan(&open); err != nil || open != 0 {
		t.Errorf("the watchdog opened %d circuits on ceiling products (%v), want none", open, err)
	}
}

func TestRestockDuringChecksEveryRound(t *testing.T) {
	tests := []struct {
		strategy    string
		wantErr     error
		wantVerdict string
		wantBroken  []int64
	}{
		// Round 1 sells out before the restock: its 409s are no sign of
		// stock left in round 2.
		{"honest", nil, verdict.Safe, nil},
		{"unsure", nil, verdict.Safe, nil},
		// Its first sale after the restock lands in round 1, beyond its 2 units.
		{"stale", errBroken, verdict.Broken, []int64{1}},
	}
	for _, tt := range tests {
		fake := newFakeFleet("honest")
		args := []string{"--stock", "2", "--buyers", "9", "--concurrency", "3", "--restock-during", "--strategies", tt.strategy}
		err, rep, table := fakeRun(t, fake, args...)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("run(%q) = %v, want %v", args, err, tt.wantErr)
		}
		if len(rep.Results) != 1 {
			t.Fatalf("run(%q): %d results, want 1", args, len(rep.Results))
		}
		res := rep.Results[0]
		if res.Verdict != tt.wantVerdict || !slices.Equal(res.BrokenRounds, tt.wantBroken) {
			t.Errorf("run(%q) = %s, broken rounds %v (%q), want %s, %v\n%s", args, res.Verdict, res.BrokenRounds, res.Reasons, tt.wantVerdict, tt.wantBroken, table)
		}
		var checked []int64
		for _, r := range res.Rounds {
			checked = append(checked, r.Round)
		}
		if !slices.Equal(checked, []int64{1, 2}) || res.Round != 2 || !rep.RestockDuring {
			t.Errorf("run(%q) checked rounds %v, current %d, want [1 2] and 2", args, checked, res.Round)
		}
		if !strings.Contains(table, "rounds") {
			t.Errorf("run(%q): the table has no rounds column:\n%s", args, table)
		}
		if tt.wantBroken != nil && !strings.Contains(table, "round 1: oversold 1 unit") {
			t.Errorf("run(%q): the table does not say which round broke:\n%s", args, table)
		}
	}
}

// TestHistoryCatchesAStaleSoldOut: a safe strategy whose first sale after
// a restock is refused sold-out from memory of the old round (issue 23,
// item 1) keeps every invariant the ledger shows — the next buyers sell
// the round out — but no order of events explains that answer: the run is
// NOT LINEARIZABLE, fails, names the false sold-out and writes porcupine's
// page beside the report.
func TestHistoryCatchesAStaleSoldOut(t *testing.T) {
	srv := httptest.NewServer(newFakeFleet("honest"))
	defer srv.Close()
	dir := t.TempDir()
	args := []string{"--url", srv.URL, "--admin-token", "t", "--json", filepath.Join(dir, "report.json"),
		"--stock", "5", "--buyers", "15", "--concurrency", "1", "--restock-during", "--strategies", "laggard,honest"}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if !errors.Is(err, errBroken) {
		t.Errorf("run(%q) = %v, want %v\n%s", args, err, errBroken, stderr.String())
	}
	b, rerr := os.ReadFile(filepath.Join(dir, "report.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("run(%q): %d results, want 2", args, len(rep.Results))
	}
	lag, honest := rep.Results[0], rep.Results[1]
	if lag.Verdict != verdict.NotLinearizable || !rep.Failed || !strings.Contains(stdout.String(), verdict.NotLinearizable) {
		t.Errorf("run(%q) laggard verdict %s (%q), failed %v; want %s in the JSON and the table:\n%s",
			args, lag.Verdict, lag.Reasons, rep.Failed, verdict.NotLinearizable, stdout.String())
	}
	if lag.History == nil || len(lag.History.Products) != 1 || lag.History.Products[0].Violation != "false sold-out" {
		t.Fatalf("run(%q) laggard history %+v, want one product with a false sold-out", args, lag.History)
	}
	page := lag.History.Products[0].Visualization
	if want := filepath.Join(dir, "report-laggard-sku-loadtest.html"); page != want {
		t.Errorf("visualization at %q, want %q", page, want)
	}
	if fi, err := os.Stat(page); err != nil || fi.Size() == 0 {
		t.Errorf("visualization %s: %v", page, err)
	}
	if !strings.Contains(stdout.String(), page) || !strings.Contains(stderr.String(), page) {
		t.Errorf("the table and the log do not name the visualization %s:\n%s\n%s", page, stdout.String(), stderr.String())
	}
	if honest.Verdict != verdict.Safe || honest.History.Verdict != string(history.Linearizable) {
		t.Errorf("honest: %s, history %+v; want SAFE and LINEARIZABLE", honest.Verdict, honest.History)
	}
}

func TestMixHasItsOwnVerdict(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    error
		wantRows   []string
		wantMix    string
		wantByName int // strategies that sold in the mix row
	}{
		// One buyer at a time: which of unsure's attempts are unknown
		// depends on their order, and with more the mix row's sellers vary.
		{"consistent strategies", []string{"--strategies", "honest,breaching,unsure,racy", "--concurrency", "1"},
			nil, []string{"honest", "breaching", "unsure", "racy", load.RowMix}, verdict.Safe, 3},
		// Alone, counter and honest are SAFE; one product sold by both oversells.
		{"strategies that are safe only alone", []string{"--strategies", "honest,counter", "--concurrency", "1", "--buyers", "12"},
			errBroken, []string{"honest", "counter", load.RowMix}, verdict.Broken, 2},
	}
	for _, tt := range tests {
		fake := newFakeFleet("honest")
		args := append([]string{"--stock", "5", "--buyers", "9", "--mix"}, tt.args...)
		err, rep, table := fakeRun(t, fake, args...)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("%s: run(%q) = %v, want %v", tt.name, args, err, tt.wantErr)
		}
		var rows []string
		for _, r := range rep.Results {
			rows = append(rows, r.Strategy)
			if r.Strategy != load.RowMix && r.Safe && r.Verdict != verdict.Safe {
				t.Errorf("%s: run(%q) row %s = %s (%q), want SAFE", tt.name, args, r.Strategy, r.Verdict, r.Reasons)
			}
		}
		if !slices.Equal(rows, tt.wantRows) {
			t.Fatalf("%s: run(%q) rows %v, want %v", tt.name, args, rows, tt.wantRows)
		}
		mix := rep.Results[len(rep.Results)-1]
		if mix.Verdict != tt.wantMix || !mix.Safe || len(mix.PerStrategy) != tt.wantByName || !rep.Mix {
			t.Errorf("%s: run(%q) mix = %s safe %v 2xx by strategy %v (%q), want %s with %d strategies selling\n%s",
				tt.name, args, mix.Verdict, mix.Safe, mix.PerStrategy, mix.Reasons, tt.wantMix, tt.wantByName, table)
		}
		if _, ok := mix.PerStrategy["racy"]; ok {
			t.Errorf("%s: run(%q) mix sold with the unsafe racy: %v", tt.name, args, mix.PerStrategy)
		}
	}
}

func TestSwitchDuring(t *testing.T) {
	tests := []struct {
		name         string
		strategies   string
		wantErr      error
		wantVerdict  string
		wantDefaults []string // PUT /strategy calls, the last one restoring "racy"
	}{
		// 12 buyers, one at a time, switching every 3: honest for 1–3,
		// breaching for 4–6, unsure 7–9, honest 10–12.
		{"consistent strategies", "honest,breaching,unsure,racy", nil, verdict.Safe,
			[]string{"honest", "breaching", "unsure", "honest", "racy"}},
		// honest sells 3 of 5, then counter sells 3 from its own counter.
		{"strategies that are safe only alone", "honest,counter", errBroken, verdict.Broken,
			[]string{"honest", "counter", "honest", "counter", "racy"}},
	}
	for _, tt := range tests {
		fake := newFakeFleet("racy")
		args := []string{"--stock", "5", "--buyers", "12", "--concurrency", "1", "--switch-during", "3", "--strategies", tt.strategies}
		err, rep, table := fakeRun(t, fake, args...)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("%s: run(%q) = %v, want %v", tt.name, args, err, tt.wantErr)
		}
		last := rep.Results[len(rep.Results)-1]
		if last.Strategy != load.RowSwitch || last.Verdict != tt.wantVerdict || !last.Safe || rep.SwitchEvery != 3 {
			t.Errorf("%s: run(%q) last row %s = %s (%q), want %s %s\n%s", tt.name, args, last.Strategy, last.Verdict, last.Reasons, load.RowSwitch, tt.wantVerdict, table)
		}
		if !slices.Equal(fake.defaults, tt.wantDefaults) || fake.def != "racy" {
			t.Errorf("%s: run(%q) switched the default %v, now %q; want %v, the previous default restored", tt.name, args, fake.defaults, fake.def, tt.wantDefaults)
		}
		if last.Switches != 3 {
			t.Errorf("%s: run(%q) reported %d switches, want 3", tt.name, args, last.Switches)
		}
		if _, ok := last.PerStrategy["racy"]; ok || len(last.PerStrategy) < 2 {
			t.Errorf("%s: run(%q) switch row sold by %v, want several safe strategies and never racy", tt.name, args, last.PerStrategy)
		}
	}
}

func TestRunExplainsAWrongAdminToken(t *testing.T) {
	srv := httptest.NewServer(newFakeFleet("honest"))
	defer srv.Close()
	args := []string{"--url", srv.URL, "--admin-token", "wrong", "--strategies", "honest"}
	err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "--admin-token") {
		t.Errorf("run(%q) = %v, want a 401 that points at --admin-token", args, err)
	}
	args = []string{"--url", srv.URL, "--admin-token", "t", "--strategies", "honest,nope"}
	if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "honest, oversells, busy, racy") {
		t.Errorf("run(%q) = %v, want errUsage listing the fleet's strategies", args, err)
	}
	for _, flag := range []string{"--mix", "--switch-during=2"} {
		args = []string{"--url", srv.URL, "--admin-token", "t", "--strategies", "racy", flag}
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want errUsage: no safe strategy to mix or switch among", args, err)
		}
	}
}
