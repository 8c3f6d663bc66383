package api

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/stock"
)

// holdsBody is GET /products/{id}/holds's answer.
type holdsBody struct {
	ProductID string `json:"product_id"`
	Instance  string `json:"instance"`
	Holds     []struct {
		Strategy string  `json:"strategy"`
		Fence    int64   `json:"fence"`
		Start    string  `json:"start"`
		End      *string `json:"end"`
		Outcome  *string `json:"outcome"`
	} `json:"holds"`
}

func (f *fixture) getHolds(id string) holdsBody {
	f.t.Helper()
	r := f.do("GET", "/products/"+id+"/holds", "", "", admin...)
	if r.status != 200 {
		f.t.Fatalf("GET /products/%s/holds = %d %s, want 200", id, r.status, r.raw)
	}
	var b holdsBody
	if err := json.Unmarshal([]byte(r.raw), &b); err != nil {
		f.t.Fatalf("GET /products/%s/holds: %v in %s", id, err, r.raw)
	}
	return b
}

// holdTimePattern is RFC 3339 in UTC with nine digits of nanoseconds.
var holdTimePattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`)

func parseHoldTime(t *testing.T, s string) time.Time {
	t.Helper()
	if !holdTimePattern.MatchString(s) {
		t.Errorf("hold time %q, want RFC 3339 in UTC with nanoseconds", s)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Errorf("hold time %q: %v", s, err)
	}
	return tm
}

func TestHoldsAreServed(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 1)
	before := time.Now()
	for _, want := range []int{200, 409} {
		if r := f.do("POST", "/sale?strategy="+inventory.RedisLock, jsonType, `{"product_id":"sku-1","quantity":1}`, admin...); r.status != want {
			t.Fatalf("POST /sale?strategy=redis = %d %s, want %d", r.status, r.raw, want)
		}
	}
	// A sale by a strategy without a lock of its own records no hold.
	f.restock("sku-1", 1)
	if r := f.do("POST", "/sale?strategy="+inventory.Atomic, jsonType, `{"product_id":"sku-1","quantity":1}`, admin...); r.status != 200 {
		t.Fatalf("POST /sale?strategy=atomic = %d %s, want 200", r.status, r.raw)
	}

	b := f.getHolds("sku-1")
	if b.ProductID != "sku-1" || b.Instance != "test-1" || len(b.Holds) != 2 {
		t.Fatalf("GET /products/sku-1/holds = %+v, want product sku-1, instance test-1, the two redis holds", b)
	}
	var prevEnd time.Time
	for i, h := range b.Holds {
		want := []string{stock.HoldSold, stock.HoldSoldOut}[i]
		if h.Strategy != inventory.RedisLock || h.Fence <= 0 || h.End == nil || h.Outcome == nil || *h.Outcome != want {
			t.Fatalf("hold %d = %+v, want a redis hold with a fence, ended %q", i, h, want)
		}
		start, end := parseHoldTime(t, h.Start), parseHoldTime(t, *h.End)
		if start.Before(before) || end.Before(start) || start.Before(prevEnd) {
			t.Errorf("hold %d: %s to %s, want after the test began (%s), ending after its start, starting after the previous hold ended (%s)",
				i, h.Start, *h.End, before.UTC().Format(time.RFC3339Nano), prevEnd.UTC().Format(time.RFC3339Nano))
		}
		prevEnd = end
	}
	if b.Holds[1].Fence <= b.Holds[0].Fence {
		t.Errorf("fences %d then %d, want them rising", b.Holds[0].Fence, b.Holds[1].Fence)
	}
}

func TestOpenHoldHasNoEndYet(t *testing.T) {
	f := newFixture(t, adminToken)
	f.holds.Begin("sku-2", inventory.Fair, 42)
	r := f.do("GET", "/products/sku-2/holds", "", "", admin...)
	if r.status != 200 || !strings.Contains(r.raw, `"end":null`) || !strings.Contains(r.raw, `"outcome":null`) {
		t.Fatalf("GET /products/sku-2/holds with a hold open = %d %s, want 200 with end and outcome null", r.status, r.raw)
	}
	b := f.getHolds("sku-2")
	if len(b.Holds) != 1 || b.Holds[0].Strategy != inventory.Fair || b.Holds[0].Fence != 42 || b.Holds[0].End != nil || b.Holds[0].Outcome != nil {
		t.Errorf("GET /products/sku-2/holds = %+v, want the open fair hold with fence 42", b)
	}
	parseHoldTime(t, b.Holds[0].Start)
}

func TestHoldsOfAProductNeverSoldIsAnEmptyList(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/products/sku-404/holds", "", "", admin...)
	if r.status != 200 || !strings.Contains(r.raw, `"holds":[]`) || r.body["product_id"] != "sku-404" {
		t.Errorf("GET /products/sku-404/holds = %d %s, want 200 with an empty list", r.status, r.raw)
	}
}

func TestHoldsAreForTheAdmin(t *testing.T) {
	f := newFixture(t, adminToken)
	f.holds.Begin("sku-1", inventory.RedisLock, 1).End(stock.HoldSold)
	disabled := newFixture(t, "")
	for _, tc := range []struct {
		name    string
		f       *fixture
		path    string
		header  []string
		status  int
		problem string
	}{
		{"no token", f, "/products/sku-1/holds", nil, 401, "unauthorized"},
		{"wrong token", f, "/products/sku-1/holds", []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"admin calls disabled", disabled, "/products/sku-1/holds", admin, 403, "admin-disabled"},
		{"bad product id", f, "/products/sku%201/holds", admin, 400, "bad-product-id"},
		{"overlong product id", f, "/products/" + strings.Repeat("a", 65) + "/holds", admin, 400, "bad-product-id"},
	} {
		r := tc.f.do("GET", tc.path, "", "", tc.header...)
		if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem {
			t.Errorf("%s: GET %s = %d %s, want %d %s", tc.name, tc.path, r.status, r.raw, tc.status, tc.problem)
		}
		if strings.Contains(r.raw, "fence") {
			t.Errorf("%s: GET %s answered holds: %s", tc.name, tc.path, r.raw)
		}
	}
}
