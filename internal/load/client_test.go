package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiclient "inventory/internal/client"
	"inventory/internal/history"
	"inventory/internal/verdict"
)

// TestBuyersComeFromTheClientSources: with --client-ips' sources, the
// buyers' connections reach the fleet from those addresses (as nginx's
// $binary_remote_addr sees them), and a fleet elsewhere is refused.
func TestBuyersComeFromTheClientSources(t *testing.T) {
	var mu sync.Mutex
	from := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.RemoteAddr, ":")
		mu.Lock()
		from[host] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sale_id":1,"product_id":"p","quantity":1,"remaining":5,"round":1}`)
	}))
	defer srv.Close()
	sources, err := ClientSources(4, srv.URL)
	if err != nil {
		t.Fatalf("ClientSources(4, %s): %v", srv.URL, err)
	}
	c := NewClient(srv.URL, "", 1, sources)
	defer c.Close()
	for range 4 {
		if o := c.buy(context.Background(), "p", "", ""); o.status != http.StatusOK {
			t.Fatalf("buy = %+v, want 200", o)
		}
	}
	for _, want := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		if !from[want] {
			t.Errorf("no buyer came from %s; they came from %v", want, from)
		}
	}

	for _, tc := range []struct {
		n       int
		target  string
		wantErr bool
	}{
		{0, "http://shop.example", false},
		{2, "", false},
		{2, "http://localhost:8080", false},
		{2, "http://[::1]:8080", false},
		{2, "http://shop.example", true},
		{2, "http://10.0.0.7:8080", true},
		{-1, "", true},
	} {
		if _, err := ClientSources(tc.n, tc.target); (err != nil) != tc.wantErr {
			t.Errorf("ClientSources(%d, %q) = %v, want error %v", tc.n, tc.target, err, tc.wantErr)
		}
	}
}

// TestSetDefaultStrategySendsTheSwitchAgain: PUT /strategy answered 503 is
// sent again until it is settled; a 400 (a strategy the fleet does not
// offer) is not, and comes back as the problem it is.
func TestSetDefaultStrategySendsTheSwitchAgain(t *testing.T) {
	var (
		mu       sync.Mutex
		requests []string
	)
	sent := func() []string { // and forgets them
		mu.Lock()
		defer mu.Unlock()
		r := requests
		requests = nil
		return r
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path+" "+strings.TrimSpace(string(b)))
		n := len(requests)
		mu.Unlock()
		switch {
		case strings.Contains(string(b), `"bogus"`):
			problem(w, http.StatusBadRequest, "unknown-strategy")
		case n <= 2:
			problem(w, http.StatusServiceUnavailable, "unavailable")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "token", 1, nil)
	defer c.Close()

	if err := c.SetDefaultStrategy(context.Background(), "atomic"); err != nil {
		t.Fatalf("SetDefaultStrategy(atomic) after two 503s = %v, want nil", err)
	}
	want := `PUT /strategy {"strategy":"atomic"}`
	if got := sent(); !slices.Equal(got, []string{want, want, want}) {
		t.Fatalf("requests = %q, want %q three times", got, want)
	}

	err := c.SetDefaultStrategy(context.Background(), "bogus")
	var p *apiclient.Problem
	if !errors.As(err, &p) || p.Status != http.StatusBadRequest {
		t.Fatalf("SetDefaultStrategy(bogus) = %v, want the 400 problem", err)
	}
	if got := sent(); len(got) != 1 {
		t.Errorf("SetDefaultStrategy(bogus) sent %q, want one request (a 400 is not sent again)", got)
	}
}

// problem answers status with a problem+json of the service's type slug.
func problem(w http.ResponseWriter, status int, slug string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"type":"urn:inventory:problem:%s","title":%q,"status":%d}`, slug, http.StatusText(status), status)
}

// TestRestockIsSentAgainUnderItsKey: a restock whose answer was lost (nginx
// answers 502 when the replica died after its commit, and never resends a
// PUT itself) is sent again with the same Idempotency-Key, so that the
// service answers the first restock's result and starts no second round.
func TestRestockIsSentAgainUnderItsKey(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			problem(w, http.StatusBadGateway, "bad-gateway")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"product_id":"p","quantity":5,"initial":5,"round":2}`)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "token", 1, nil)
	defer c.Close()
	p, err := c.restock(context.Background(), "p", 5)
	if err != nil || p.Round != 2 {
		t.Fatalf("restock after a 502 = %+v, %v; want round 2", p, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("restock sent Idempotency-Keys %q, want the same key twice", keys)
	}
}

// TestHoldIsSentAgainUnderItsKey: a hold answered 504 (nginx, the replica
// gone quiet) and then 503 outcome-unknown is sent again under the same
// Idempotency-Key until it is answered; the replayed 201 is the buyer's
// answer (sold, the stock it reports being today's), and a hold whose
// every answer said nothing stays unknown under its key, for the ledger
// to settle.
func TestHoldIsSentAgainUnderItsKey(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
		fail bool // answer every try 503 outcome-unknown
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n, failing := len(keys), fail
		mu.Unlock()
		switch {
		case !strings.Contains(string(b), `"pay_within":"1s"`):
			problem(w, http.StatusBadRequest, "bad-request")
		case n == 1 && !failing:
			problem(w, http.StatusGatewayTimeout, "gateway-timeout")
		case n == 2 || failing:
			problem(w, http.StatusServiceUnavailable, "outcome-unknown")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"order_id":"3f2b5c1e-8d4a-4b6e-9c1f-2a7d5e8b9c0d","sale_id":9,"product_id":"p","quantity":1,"state":"held",`+
				`"expires_at":"2026-11-29T10:15:00Z","remaining":4,"round":2,"strategy":"atomic","instance":"inventory-1"}`)
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "token", 1, nil)
	defer c.Close()
	sent := func() []string { // and forgets them
		mu.Lock()
		defer mu.Unlock()
		k := keys
		keys = nil
		return k
	}

	h, o, retries := c.holdRetrying(context.Background(), "p", "", "k-7", time.Second, 3)
	if o.status != http.StatusCreated || !o.replayed || h.OrderID == "" || o.saleID != 9 || retries != 2 {
		t.Fatalf("holdRetrying after a 504 and a 503 outcome-unknown = %+v, %+v, %d retries; want the replayed 201 of sale 9 after 2", h, o, retries)
	}
	if got := sent(); !slices.Equal(got, []string{"k-7", "k-7", "k-7"}) {
		t.Errorf("Idempotency-Keys sent %q, want k-7 three times", got)
	}
	if op := o.op(1, "p", "k-7", time.Now(), time.Now()); op.Outcome != history.Sold || op.Remaining != -1 || op.Round != 2 {
		t.Errorf("op %+v: want sold in round 2, no remaining (a replay tells today's)", op)
	}

	mu.Lock()
	fail = true
	mu.Unlock()
	_, o, retries = c.holdRetrying(context.Background(), "p", "", "k-8", time.Second, 2)
	op := o.op(1, "p", "k-8", time.Now(), time.Now())
	if op.Outcome != history.Unknown || op.Key != "k-8" || retries != 2 {
		t.Fatalf("holdRetrying answered outcome-unknown every time = %+v, %d retries; want unknown under key k-8 after 2", op, retries)
	}
	if got := sent(); len(got) != 3 {
		t.Errorf("sent %d times, want 3 (once and 2 retries)", len(got))
	}
	ops := []history.Op{op}
	if n := settle(ops, []verdict.LedgerRow{{ID: 10, Key: "k-8", Round: 2}}); n != 1 || ops[0].Outcome != history.Sold || ops[0].Round != 2 || !ops[0].Late {
		t.Errorf("settle = %d, %+v; want the hold sold in round 2, late", n, ops[0])
	}
}
