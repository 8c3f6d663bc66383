package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// The bodies buyers send are scanned; the rest goes to encoding/json.
func TestScanSaleTakesTheUsualShapesOnly(t *testing.T) {
	for _, tc := range []struct {
		body        string
		withProduct bool
		scanned     bool
	}{
		{`{"product_id":"sku-1","quantity":1}`, true, true},
		{` { "quantity" : 12 ,` + "\n\t\r" + `"product_id" : "A.b_c-9" } `, true, true},
		{`{"quantity":1}`, false, true},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"15m"}`, true, true},
		{`{"pay_within":"1h30m","quantity":1}`, false, true},
		{`{"pay_within":"not a duration","quantity":1}`, false, true}, // the service then says it is no duration
		{`{"quantity":1,"pay_within":900}`, false, false},
		{`{"quantity":1,"pay_within":null}`, false, false},
		{`{"quantity":1,"pay_within":"15m","pay_within":"1m"}`, false, false},
		{`{"quantity":1,"pay_within":"15\u006d"}`, false, false},
		{`{"quantity":1}`, true, true}, // the service then says product_id is required
		{`{}`, true, true},
		{`{"product_id":"sku-1","quantity":-0}`, true, true},
		{`{"product_id":"ßku","quantity":1}`, true, true}, // UTF-8 kept as is, refused later by the id rule
		{`{"product_id":"sku-1","quantity":1}`, false, false},
		{`{"product_id":"sku-1","quantity":1,"quantity":2}`, true, false},
		{`{"Quantity":1}`, false, false},
		{`{"product_id":"sku\u002d1","quantity":1}`, true, false},
		{`{"product_id":"sku-1","quantity":01}`, true, false},
		{`{"product_id":"sku-1","quantity":1.0}`, true, false},
		{`{"product_id":"sku-1","quantity":1e0}`, true, false},
		{`{"product_id":"sku-1","quantity":1234567890123456789}`, true, false},
		{`{"product_id":"sku-1","quantity":null}`, true, false},
		{`{"product_id":"sku-1","quantity":"1"}`, true, false},
		{`{"product_id":"sku-1","quantity":1,}`, true, false},
		{`{"product_id":"sku-1","quantity":1}{}`, true, false},
		{`{"product_id":"sku-1","quantity":1`, true, false},
		{"{\"product_id\":\"sku\t1\",\"quantity\":1}", true, false},
		{"\ufeff{\"quantity\":1}", false, false},
		{`[]`, true, false},
		{``, true, false},
	} {
		if _, scanned := ScanSaleRequest(tc.body, tc.withProduct); scanned != tc.scanned {
			t.Errorf("ScanSaleRequest(%q, withProduct %v) scanned = %v, want %v", tc.body, tc.withProduct, scanned, tc.scanned)
		}
	}
}

// unmarshalStrict is how the service decodes a body the scanner gave up
// on: exactly one JSON object, unknown members and trailing data refused.
func unmarshalStrict(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// Whatever ScanSaleRequest takes, encoding/json (strict, as the service
// decodes) takes too and reads the same.
func FuzzScanSale(f *testing.F) {
	for _, seed := range []string{
		`{"product_id":"sku-1","quantity":1}`, `{"quantity":3}`, ` {"quantity" : -0 , "product_id":"x"} `,
		`{"product_id":"sku-1","quantity":01}`, `{"product_id":"a\"b","quantity":1}`, `{"quantity":999999999999999999}`,
		`{"quantity":1,"quantity":1}`, `{"QUANTITY":1}`, `{}`, `{"product_id":"sku-1","quantity":1}x`,
		`{"product_id":"sku-1","quantity":1,"pay_within":"15m"}`, `{"quantity":1,"pay_within":90}`, `{"pay_within":null,"quantity":1}`,
		`{"quantity":1,"Pay_Within":"1s"}`, `{"quantity":1,"pay_within":"a\"b"}`,
		"{\"product_id\":\"sku-\xff\",\"quantity\":1}",
	} {
		f.Add([]byte(seed), true)
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, withProduct bool) {
		req, scanned := ScanSaleRequest(string(body), withProduct)
		if !scanned {
			return
		}
		var want SaleBody
		var err error
		if withProduct {
			err = unmarshalStrict(body, &want)
		} else {
			var p ProductSaleBody
			err = unmarshalStrict(body, &p)
			want.Quantity, want.PayWithin = p.Quantity, p.PayWithin
		}
		if err != nil {
			t.Fatalf("ScanSaleRequest(%q, %v) took it, encoding/json refuses it: %v", body, withProduct, err)
		}
		if same := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }; !same(req.ProductID, want.ProductID) {
			t.Fatalf("ScanSaleRequest(%q) product_id %v, encoding/json %v", body, show(req.ProductID), show(want.ProductID))
		}
		if (req.Quantity == nil) != (want.Quantity == nil) || (req.Quantity != nil && *req.Quantity != *want.Quantity) {
			t.Fatalf("ScanSaleRequest(%q) quantity %v, encoding/json %v", body, show(req.Quantity), show(want.Quantity))
		}
		if same := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }; !same(req.PayWithin, want.PayWithin) {
			t.Fatalf("ScanSaleRequest(%q) pay_within %v, encoding/json %v", body, show(req.PayWithin), show(want.PayWithin))
		}
	})
}

func show[T any](p *T) any {
	if p == nil {
		return "absent"
	}
	return *p
}

// The service's own answers take the fast path.
func TestTheServicesAnswersAreScanned(t *testing.T) {
	for _, s := range []string{
		`{"sale_id":42,"product_id":"sku-1","quantity":2,"remaining":-8,"round":3,"strategy":"redis","instance":"inventory-1"}` + "\n",
		`{"round":2,"remaining":4,"strategy":"atomic"}`,
		`{}`,
	} {
		var sale Sale
		if !ScanSale(s, &sale) {
			t.Errorf("ScanSale(%q) gave up, want it read", s)
		}
	}
	for _, s := range []string{
		`{"type":"urn:inventory:problem:sold-out","title":"Sold out","status":409,"detail":"Fewer units are left than this order asks for; nothing was sold.","instance":"/sale","request_id":"0123456789abcdef0123456789abcdef"}` + "\n",
		`{"type":"urn:inventory:problem:lock-lost","title":"Lock lost","status":503,"detail":"d","lock_breach":true}`,
		`{"type":"urn:inventory:problem:order-state","title":"Order state","status":409,"detail":"d","instance":"/orders/x/refund","request_id":"r","state":"shipped"}` + "\n",
	} {
		if !ScanProblem(s, &Problem{}) {
			t.Errorf("ScanProblem(%q) gave up, want it read", s)
		}
	}
	if s := `{"status":"ok","instance":"inventory-1"}` + "\n"; !ScanHealth(s, &Health{}) {
		t.Errorf("ScanHealth(%q) gave up, want it read", s)
	}
}

var scanSeeds = []string{
	``, ` `, `{`, `}`, `{}`, ` { } `, `{} x`, `[]`, `null`, `"x"`,
	`{"sale_id":1}`, `{"sale_id":-0}`, `{"sale_id":01}`, `{"sale_id":1.0}`, `{"sale_id":1e2}`, `{"sale_id":-}`,
	`{"sale_id":9223372036854775807}`, `{"sale_id":9223372036854775808}`, `{"sale_id":"1"}`, `{"sale_id":null}`,
	`{"sale_id":1,"sale_id":null}`, `{"sale_id":1,"sale_id":2}`, `{"Sale_ID":1}`, `{"other":1}`, `{"sale_id":true}`,
	`{"strategy":"redis"}`, `{"strategy":"re\"dis"}`, `{"strategy":"ré"}`, "{\"strategy\":\"r\xffe\"}", "{\"strategy\":\"a\tb\"}",
	`{"strategy":1}`, `{"strategy":null}`, `{"strategy":"a",}`, `{"strategy":"a" "b"}`, `{"strategy" "a"}`, `{"strategy":"a"`,
	`{"instance":"inventory-1","round":2,"remaining":-3,"product_id":"p","quantity":1}`, `{"round":{"x":1}}`, `{"round":[1]}`,
	`{"type":"urn:inventory:problem:sold-out","status":409,"lock_breach":true}`, `{"lock_breach":false}`, `{"lock_breach":1}`,
	`{"status":"409"}`, `{"status":"ok","instance":"i"}`, `{"status":"ok","Instance":"i"}`, `{"status":{}}`, `{"detail":"x\u0041"}`, `{"request_id":"r","title":"t","instance":"/sale"}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13}`,
	`{"status":1,"status":2,"status":3,"status":4,"status":5,"status":6,"status":7,"status":8,"status":9,"status":10,"status":11,"status":12,"status":13}`,
	"{\"lock_breach\":tru}", "{\"lock_breach\":truex}", "{\"lock_breach\":nul}",
	`{"status":-999999999999999999}`, `{"status":1000000000000000000}`, `{"status":null,"type":"t"}`,
	`{"type":"urn:inventory:problem:order-expired","status":409,"state":"expired"}`, `{"state":null}`, `{"state":1}`, `{"State":"paid"}`,
}

// Whatever the fast readers of answers read, encoding/json reads the same.
func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var scanned Sale
		if ScanSale(s, &scanned) {
			var decoded Sale
			if err := json.Unmarshal([]byte(s), &decoded); err != nil || decoded != scanned {
				t.Errorf("ScanSale(%q) = %+v; encoding/json: %+v, %v", s, scanned, decoded, err)
			}
		}
		var h Health
		if ScanHealth(s, &h) {
			var decoded Health
			if err := json.Unmarshal([]byte(s), &decoded); err != nil || decoded != h {
				t.Errorf("ScanHealth(%q) = %+v; encoding/json: %+v, %v", s, h, decoded, err)
			}
		}
		var p Problem
		if ScanProblem(s, &p) {
			var want Problem
			if err := json.Unmarshal([]byte(s), &want); err != nil || p != want {
				t.Errorf("ScanProblem(%q) = %+v; encoding/json: %+v, %v", s, p, want, err)
			}
		}
	})
}
