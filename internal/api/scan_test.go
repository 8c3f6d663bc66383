package api

import (
	"testing"
	"unicode/utf8"
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
		{`{"quantity":1}`, true, true}, // readSale then says product_id is required
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
		if _, scanned := scanSale([]byte(tc.body), tc.withProduct); scanned != tc.scanned {
			t.Errorf("scanSale(%q, withProduct %v) scanned = %v, want %v", tc.body, tc.withProduct, scanned, tc.scanned)
		}
	}
}

// Whatever scanSale takes, encoding/json (unmarshalStrict, the reference)
// takes too and reads the same.
func FuzzScanSale(f *testing.F) {
	for _, seed := range []string{
		`{"product_id":"sku-1","quantity":1}`, `{"quantity":3}`, ` {"quantity" : -0 , "product_id":"x"} `,
		`{"product_id":"sku-1","quantity":01}`, `{"product_id":"a\"b","quantity":1}`, `{"quantity":999999999999999999}`,
		`{"quantity":1,"quantity":1}`, `{"QUANTITY":1}`, `{}`, `{"product_id":"sku-1","quantity":1}x`,
	} {
		f.Add([]byte(seed), true)
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, withProduct bool) {
		if !utf8.Valid(body) { // readJSONBody refuses it before any scan
			return
		}
		req, scanned := scanSale(body, withProduct)
		if !scanned {
			return
		}
		var want saleRequest
		var err error
		if withProduct {
			err = unmarshalStrict(body, &want)
		} else {
			var p productSaleRequest
			err = unmarshalStrict(body, &p)
			want.Quantity = p.Quantity
		}
		if err != nil {
			t.Fatalf("scanSale(%q, %v) took it, encoding/json refuses it: %v", body, withProduct, err)
		}
		if same := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }; !same(req.ProductID, want.ProductID) {
			t.Fatalf("scanSale(%q) product_id %v, encoding/json %v", body, show(req.ProductID), show(want.ProductID))
		}
		if (req.Quantity == nil) != (want.Quantity == nil) || (req.Quantity != nil && *req.Quantity != *want.Quantity) {
			t.Fatalf("scanSale(%q) quantity %v, encoding/json %v", body, show(req.Quantity), show(want.Quantity))
		}
	})
}

func show[T any](p *T) any {
	if p == nil {
		return "absent"
	}
	return *p
}
