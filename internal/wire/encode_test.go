package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// A sale's body says what encoding/json would, whatever the product id.
func FuzzSaleBody(f *testing.F) {
	for _, s := range []string{"sku-1", `a"b`, `a\b`, "a\nb\x01\x1f", "ü–✓", "\xff", "a\u2028b", "<&>"} {
		f.Add(s, int64(1), "")
		f.Add(s, int64(1), s)
	}
	f.Add("sku-1", int64(-9223372036854775808), "15m")
	f.Fuzz(func(t *testing.T, id string, quantity int64, payWithin string) {
		var got, want SaleRequest
		req := SaleRequest{ProductID: id, Quantity: quantity, PayWithin: payWithin}
		body := req.AppendJSON(nil)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%+v.AppendJSON = %s, not JSON: %v", req, body, err)
		}
		b, _ := json.Marshal(req)
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v.AppendJSON reads as %+v, encoding/json's as %+v", req, got, want)
		}
		if !bytes.Equal(body, b) {
			t.Errorf("%+v.AppendJSON = %s, encoding/json writes %s", req, body, b)
		}
		product := ProductSaleRequest{Quantity: quantity, PayWithin: payWithin}
		if b, _ := json.Marshal(product); !bytes.Equal(product.AppendJSON(nil), b) {
			t.Errorf("%+v.AppendJSON = %s, encoding/json writes %s", product, product.AppendJSON(nil), b)
		}
	})
}

// AppendJSON writes what encoding/json's Encoder would, byte for byte.
func FuzzProblemJSON(f *testing.F) {
	for _, seed := range []string{
		"", "/sale", "sold out", `a"b\c`, "<script>&</script>", "tab\tnew\nline\rcr\bbs\fff\x00\x1f\x7f",
		"ünïcödé ✓ 𝄞", "\u2028\u2029", "bad \xff utf-8 \xe2\x82", "/products/%ZZ/sale",
	} {
		f.Add(seed, seed+"!", 409, seed == "")
	}
	f.Fuzz(func(t *testing.T, text, path string, status int, breach bool) {
		p := Problem{Type: ProblemTypePrefix + text, Title: text, Status: int64(status), Detail: text,
			Instance: path, RequestID: text, LockBreach: breach, State: text}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("AppendJSON(%+v)\n got %s\nwant %s", p, got, want.Bytes())
		}
	})
}
