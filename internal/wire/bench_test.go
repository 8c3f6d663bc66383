package wire

import "testing"

// The readers and writers of the bodies that come and go by the thousand,
// each on its usual input: what a sale and a sold-out answer cost on each
// side before HTTP.

func BenchmarkScanSaleRequest(b *testing.B) {
	body := []byte(`{"product_id":"bench-sold-out","quantity":1}`)
	b.ReportAllocs()
	for b.Loop() {
		// The string conversion is the service's too: the product id is a
		// substring of it.
		if _, ok := ScanSaleRequest(string(body), true); !ok {
			b.Fatal("ScanSaleRequest gave up")
		}
	}
}

func BenchmarkSaleRequestAppendJSON(b *testing.B) {
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = SaleRequest{ProductID: "bench-sold-out", Quantity: 1}.AppendJSON(buf[:0])
	}
}

func BenchmarkProblemAppendJSON(b *testing.B) {
	p := Problem{Type: ProblemTypePrefix + "sold-out", Title: "Sold out", Status: 409,
		Detail: "Fewer units are left than this order asks for; nothing was sold.", Instance: "/sale",
		RequestID: "0123456789abcdef0123456789abcdef"}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendJSON(buf[:0])
	}
}

func BenchmarkScanSale(b *testing.B) {
	s := `{"sale_id":42,"product_id":"sku-1","quantity":1,"remaining":8,"round":3,"strategy":"redis","instance":"inventory-1"}` + "\n"
	b.ReportAllocs()
	for b.Loop() {
		var sale Sale
		if !ScanSale(s, &sale) {
			b.Fatal("ScanSale gave up")
		}
	}
}

func BenchmarkScanProblem(b *testing.B) {
	s := `{"type":"urn:inventory:problem:sold-out","title":"Sold out","status":409,` +
		`"detail":"Fewer units are left than this order asks for; nothing was sold.","instance":"/sale",` +
		`"request_id":"0123456789abcdef0123456789abcdef"}` + "\n"
	b.ReportAllocs()
	for b.Loop() {
		var p Problem
		if !ScanProblem(s, &p) {
			b.Fatal("ScanProblem gave up")
		}
	}
}
