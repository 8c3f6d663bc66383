package client

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The service's own answers take the fast path.
func TestTheServicesAnswersAreScanned(t *testing.T) {
	for _, s := range []string{
		`{"sale_id":42,"product_id":"sku-1","quantity":2,"remaining":-8,"round":3,"strategy":"redis","instance":"inventory-1"}` + "\n",
		`{"round":2,"remaining":4,"strategy":"atomic"}`,
		`{}`,
	} {
		var sale Sale
		if !scanSale(s, &sale) {
			t.Errorf("scanSale(%q) gave up, want it read", s)
		}
	}
	for _, s := range []string{
		`{"type":"urn:inventory:problem:sold-out","title":"Sold out","status":409,"detail":"Fewer units are left than this order asks for; nothing was sold.","instance":"/sale","request_id":"0123456789abcdef0123456789abcdef"}` + "\n",
		`{"type":"urn:inventory:problem:lock-lost","title":"Lock lost","status":503,"detail":"d","lock_breach":true}`,
	} {
		if !scanProblem(s, &Problem{}) {
			t.Errorf("scanProblem(%q) gave up, want it read", s)
		}
	}
	if s := `{"status":"ok","instance":"inventory-1"}` + "\n"; !scanHealth(s, &Health{}) {
		t.Errorf("scanHealth(%q) gave up, want it read", s)
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
}

// Whatever the fast readers read, encoding/json reads the same.
func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var scanned Sale
		if scanSale(s, &scanned) {
			var decoded Sale
			if err := json.Unmarshal([]byte(s), &decoded); err != nil || decoded != scanned {
				t.Errorf("scanSale(%q) = %+v; encoding/json: %+v, %v", s, scanned, decoded, err)
			}
		}
		var h Health
		if scanHealth(s, &h) {
			var decoded Health
			if err := json.Unmarshal([]byte(s), &decoded); err != nil || decoded != h {
				t.Errorf("scanHealth(%q) = %+v; encoding/json: %+v, %v", s, h, decoded, err)
			}
		}
		var p Problem
		if scanProblem(s, &p) {
			var j problemJSON
			err := json.Unmarshal([]byte(s), &j)
			var want Problem
			j.into(&want)
			if err != nil || p != want {
				t.Errorf("scanProblem(%q) = %+v; encoding/json: %+v, %v", s, p, want, err)
			}
		}
	})
}

// A sale's body says what encoding/json would, whatever the product id.
func FuzzSaleBody(f *testing.F) {
	for _, s := range []string{"sku-1", `a"b`, `a\b`, "a\nb\x01\x1f", "ü–✓", "\xff", "a\u2028b", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, id), &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s, not JSON: %v", id, appendJSONString(nil, id), err)
		}
		b, _ := json.Marshal(id)
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("appendJSONString(%q) reads as %q, encoding/json's as %q", id, got, want)
		}
	})
}
