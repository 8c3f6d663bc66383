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
		f.Add(s, int64(1))
	}
	f.Add("sku-1", int64(-9223372036854775808))
	f.Fuzz(func(t *testing.T, id string, quantity int64) {
		var got, want SaleRequest
		body := SaleRequest{ProductID: id, Quantity: quantity}.AppendJSON(nil)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("SaleRequest{%q, %d}.AppendJSON = %s, not JSON: %v", id, quantity, body, err)
		}
		b, _ := json.Marshal(SaleRequest{ProductID: id, Quantity: quantity})
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("SaleRequest{%q, %d}.AppendJSON reads as %+v, encoding/json's as %+v", id, quantity, got, want)
		}
		if !bytes.Equal(body, b) {
			t.Errorf("SaleRequest{%q, %d}.AppendJSON = %s, encoding/json writes %s", id, quantity, body, b)
		}
		product := ProductSaleRequest{Quantity: quantity}
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
			Instance: path, RequestID: text, LockBreach: breach}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("AppendJSON(%+v)\n got %s\nwant %s", p, got, want.Bytes())
		}
	})
}
