package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestParseProductFlags(t *testing.T) {
	t.Setenv("INVENTORY_ADMIN_TOKEN", "")
	tests := []struct {
		args []string
		want string // "" when valid, else part of the usage error
	}{
		{nil, ""},
		{[]string{"--products", "1"}, ""},
		{[]string{"--products", "8"}, ""},
		{[]string{"--products", "10000", "--zipf", "2.5"}, ""},
		{[]string{"--products", "8", "--mix", "--restock-during", "--switch-during", "10", "--by-product", "--ceilings"}, ""},
		{[]string{"--products", "0"}, "--products must be from 1 to 10000, got 0"},
		{[]string{"--products", "10001"}, "--products must be from 1 to 10000, got 10001"},
		{[]string{"--products", "-3"}, "--products must be from 1 to 10000"},
		{[]string{"--products", "8", "--zipf", "1"}, "--zipf must be a number above 1, got 1"},
		{[]string{"--products", "8", "--zipf", "0.5"}, "--zipf must be a number above 1"},
		{[]string{"--products", "8", "--zipf", "NaN"}, "--zipf must be a number above 1"},
		{[]string{"--products", "8", "--zipf", "+Inf"}, "--zipf must be a number above 1"},
		{[]string{"--zipf", "1.5"}, "--zipf only applies with --products above 1"},
		{[]string{"--products", "100", "--product", strings.Repeat("p", 61)}, "would pass the service's 64-character limit"},
		{[]string{"--products", "100", "--product", strings.Repeat("p", 60)}, ""},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v, want no error", tt.args, err)
		case tt.want != "" && (!errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("parseFlags(%q) = %v, want a usage error saying %q", tt.args, err, tt.want)
		case tt.want == "" && len(tt.args) == 0 && (o.products != 1 || o.zipf != load.DefaultZipf):
			t.Errorf("parseFlags() products %d zipf %v, want defaults 1 and %v", o.products, o.zipf, load.DefaultZipf)
		}
	}
}

// multiFake is a fleet of many products with two strategies: honest sells
// while a product's stock remains; leaky (claims safety) oversells
// product "<prefix>-1" by one unit, once, and is honest elsewhere. It keeps
// every round, and a default strategy (honest unless PUT /strategy).
type multiFake struct {
	mu       sync.Mutex
	products map[string]*multiProduct
	def      string
	leaked   bool
	restocks int
}

type multiProduct struct {
	qty, round int64
	rounds     map[int64]*fakeRound // fakeRound: exit_test.go
}

func newMultiFake() *multiFake {
	return &multiFake{products: map[string]*multiProduct{}, def: "honest"}
}

func (f *multiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/strategies":
		_, _ = w.Write([]byte(`[{"name":"honest","safe":true},{"name":"leaky","safe":true}]`))
	case r.Method == http.MethodGet && r.URL.Path == "/strategy":
		_ = json.NewEncoder(w).Encode(map[string]string{"strategy": f.def})
	case r.Method == http.MethodPut && r.URL.Path == "/strategy":
		var body struct{ Strategy string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.def = body.Strategy
		_ = json.NewEncoder(w).Encode(body)
	case r.Method == http.MethodPut && len(parts) == 2 && parts[0] == "products":
		var body struct{ Quantity int64 }
		_ = json.NewDecoder(r.Body).Decode(&body)
		p := f.products[parts[1]]
		if p == nil {
			p = &multiProduct{rounds: map[int64]*fakeRound{}}
			f.products[parts[1]] = p
		}
		f.restocks++
		p.round++
		p.qty = body.Quantity
		p.rounds[p.round] = &fakeRound{initial: body.Quantity}
		_ = json.NewEncoder(w).Encode(p.json())
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "products":
		p := f.products[parts[1]]
		if p == nil {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(p.json())
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "products" && parts[2] == "rounds":
		n, _ := strconv.ParseInt(parts[3], 10, 64)
		p := f.products[parts[1]]
		if p == nil || p.rounds[n] == nil {
			http.NotFound(w, r)
			return
		}
		rd := p.rounds[n]
		_ = json.NewEncoder(w).Encode(map[string]any{"round": n, "initial": rd.initial, "sold": rd.sold, "sales": rd.sales, "current": n == p.round})
	case r.Method == http.MethodPost && r.URL.Path == "/sale":
		var body struct {
			ProductID string `json:"product_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		p := f.products[body.ProductID]
		if p == nil {
			problem(w, http.StatusNotFound, "not-found", false)
			return
		}
		strategy := f.def
		if named := r.URL.Query().Get("strategy"); named != "" {
			strategy = named
		}
		leak := strategy == "leaky" && strings.HasSuffix(body.ProductID, "-1") && !f.leaked && p.qty < 1
		if p.qty < 1 && !leak {
			problem(w, http.StatusConflict, "sold-out", false)
			return
		}
		f.leaked = f.leaked || leak
		p.qty--
		p.rounds[p.round].sold++
		p.rounds[p.round].sales++
		_ = json.NewEncoder(w).Encode(map[string]any{"round": p.round, "strategy": strategy, "remaining": p.qty})
	default:
		http.NotFound(w, r)
	}
}

func (p *multiProduct) json() map[string]int64 {
	rd := p.rounds[p.round]
	return map[string]int64{"quantity": p.qty, "initial": rd.initial, "sold": rd.sold, "sales": rd.sales, "round": p.round}
}

func TestManyProductsAreEachCheckedOnTheirOwn(t *testing.T) {
	fake := newMultiFake()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	args := []string{"--url", srv.URL, "--admin-token", "t", "--json", "-", "--product", "m", "--products", "5",
		"--stock", "10", "--buyers", "200", "--concurrency", "8", "--strategies", "honest,leaky"}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if !errors.Is(err, errBroken) {
		t.Fatalf("run(%q) = %v, want errBroken (leaky oversold product m-1)\n%s", args, err, stderr.String())
	}
	rep := readReport(t, stdout.Bytes())
	if len(rep.Results) != 2 || rep.Products != 5 || rep.Zipf != load.DefaultZipf {
		t.Fatalf("run(%q): %d results, products %d, zipf %v; want 2 rows, 5, %v", args, len(rep.Results), rep.Products, rep.Zipf, load.DefaultZipf)
	}
	if fake.restocks != 10 {
		t.Errorf("run(%q) restocked %d times, want every product once per row (10)", args, fake.restocks)
	}
	for _, r := range rep.Results {
		if len(r.Products) != 5 {
			t.Fatalf("%s: %d products in the result, want 5", r.Strategy, len(r.Products))
		}
		var ok, units, final, initial, buyers int64
		for i, p := range r.Products {
			if want := "m-" + strconv.Itoa(i+1); p.Product != want {
				t.Errorf("%s: product %d is %q, want %q", r.Strategy, i, p.Product, want)
			}
			db := fake.products[p.Product]
			if rd := db.rounds[p.Round]; p.Initial != 10 || p.LedgerUnits != rd.sold || (p.Round == db.round && p.FinalStock != db.qty) {
				t.Errorf("%s %s: initial %d ledger %d final %d, the fleet says 10, %d, %d", r.Strategy, p.Product, p.Initial, p.LedgerUnits, p.FinalStock, rd.sold, db.qty)
			}
			if p.Buyers != p.OK+p.SoldOut {
				t.Errorf("%s %s: %d buyers, %d×2xx %d×409", r.Strategy, p.Product, p.Buyers, p.OK, p.SoldOut)
			}
			ok, units, final, initial, buyers = ok+p.OK, units+p.LedgerUnits, final+p.FinalStock, initial+p.Initial, buyers+p.Buyers
		}
		if r.OK != ok || r.LedgerUnits != units || r.FinalStock != final || r.Initial != initial || r.OK+r.SoldOut != 200 || buyers != 200 {
			t.Errorf("%s: row 2xx %d ledger %d final %d initial %d (2xx+409 %d), products sum to %d %d %d %d; want the sums, 200 answers",
				r.Strategy, r.OK, r.LedgerUnits, r.FinalStock, r.Initial, r.OK+r.SoldOut, ok, units, final, initial)
		}
		if hot, cold := r.Products[0], r.Products[4]; hot.Buyers <= cold.Buyers || hot.SoldOut == 0 {
			t.Errorf("%s: product 1 had %d buyers (%d×409), product 5 %d; want product 1 the hottest and sold out", r.Strategy, hot.Buyers, hot.SoldOut, cold.Buyers)
		}
	}
	honest, leaky := rep.Results[0], rep.Results[1]
	if honest.Verdict != verdict.Safe || honest.Oversold != 0 || slices.ContainsFunc(honest.Products, func(p load.ProductResult) bool { return p.Broken || p.FinalStock < 0 }) {
		t.Errorf("honest: %s oversold %d products %+v, want SAFE, every product ≥ 0", honest.Verdict, honest.Oversold, honest.Products)
	}
	if leaky.Verdict != verdict.Broken || leaky.Oversold != 1 || !leaky.Products[0].Broken || leaky.Products[0].Oversold != 1 ||
		slices.ContainsFunc(leaky.Products[1:], func(p load.ProductResult) bool { return p.Broken }) {
		t.Errorf("leaky: %s oversold %d, products %+v; want BROKEN by product m-1 alone, oversold 1", leaky.Verdict, leaky.Oversold, leaky.Products)
	}
	if len(leaky.Reasons) == 0 || !strings.HasPrefix(leaky.Reasons[0], "m-1: ") {
		t.Errorf("leaky reasons %q, want them to name product m-1", leaky.Reasons)
	}
	for _, want := range []string{"200 buyers × 1 unit against 5 products × 10 in stock (m-1 … m-5, Zipf s=1.1", "leaky BROKEN: m-1: oversold 1 unit", "honest: 5 products,"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("run(%q) output lacks %q:\n%s", args, want, stderr.String())
		}
	}
}

// TestManyProductsWithTheHarderScenarios runs --products with --mix,
// --switch-during and --restock-during together: every product restocked
// mid-run, each of its two rounds checked on its own, the default restored.
func TestManyProductsWithTheHarderScenarios(t *testing.T) {
	fake := newMultiFake()
	fake.def = "leaky" // the switch row must not sell with it, and must put it back
	srv := httptest.NewServer(fake)
	defer srv.Close()
	args := []string{"--url", srv.URL, "--admin-token", "t", "--json", "-", "--product", "h", "--products", "4", "--zipf", "2",
		"--stock", "10", "--buyers", "90", "--concurrency", "4", "--strategies", "honest", "--mix", "--switch-during", "10", "--restock-during"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) = %v\n%s", args, err, stderr.String())
	}
	rep := readReport(t, stdout.Bytes())
	var rows []string
	for _, r := range rep.Results {
		rows = append(rows, r.Strategy)
		if r.Verdict != verdict.Safe || len(r.Products) != 4 {
			t.Errorf("%s: %s with %d products (%q), want SAFE with 4", r.Strategy, r.Verdict, len(r.Products), r.Reasons)
			continue
		}
		var okSum int64
		for _, p := range r.Products {
			if len(p.Rounds) != 2 || p.Rounds[0].Initial != 10 || p.Rounds[1].Initial != 10 || !p.Rounds[1].Current {
				t.Errorf("%s %s: rounds %+v, want two of 10, the second current", r.Strategy, p.Product, p.Rounds)
			}
			for _, rd := range p.Rounds {
				okSum += rd.OK
			}
		}
		if okSum != r.OK || r.Initial != 80 {
			t.Errorf("%s: 2xx by product round sum to %d, row %d; initial %d, want 80 (4 products × 2 rounds × 10)", r.Strategy, okSum, r.OK, r.Initial)
		}
	}
	if !slices.Equal(rows, []string{"honest", load.RowMix, load.RowSwitch}) {
		t.Errorf("rows %v, want honest, mix, switch", rows)
	}
	if fake.def != "leaky" || fake.leaked {
		t.Errorf("fleet default after the run %q (leaky sold: %v), want leaky restored and never sold with", fake.def, fake.leaked)
	}
	if want := 3 * 4 * 2; fake.restocks != want {
		t.Errorf("%d restocks, want %d (3 rows × 4 products × 2 rounds)", fake.restocks, want)
	}
	if !strings.Contains(stderr.String(), "2 per product") {
		t.Errorf("the table lacks the rounds per product:\n%s", stderr.String())
	}
}
