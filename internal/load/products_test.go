package load

import (
	"slices"
	"testing"
)

func TestProductIDs(t *testing.T) {
	if got := productIDs(Config{Product: "sku"}); !slices.Equal(got, []string{"sku"}) {
		t.Errorf("productIDs(Products 0) = %q, want [sku]", got)
	}
	if got := productIDs(Config{Product: "sku", Products: 1}); !slices.Equal(got, []string{"sku"}) {
		t.Errorf("productIDs(Products 1) = %q, want [sku]", got)
	}
	if got := productIDs(Config{Product: "sku", Products: 3}); !slices.Equal(got, []string{"sku-1", "sku-2", "sku-3"}) {
		t.Errorf("productIDs(Products 3) = %q, want [sku-1 sku-2 sku-3]", got)
	}
}

func TestZipfChoicesAreSkewedAndInRange(t *testing.T) {
	const n, buyers = 8, 20000
	choices := zipfChoices(n, buyers, DefaultZipf, 1)
	if len(choices) != buyers {
		t.Fatalf("zipfChoices(%d, %d) gave %d choices", n, buyers, len(choices))
	}
	count := make([]int, n)
	for i, c := range choices {
		if c < 0 || c >= n {
			t.Fatalf("zipfChoices(%d, …)[%d] = %d, out of [0, %d)", n, i, c, n)
		}
		count[c]++
	}
	// P(k) ∝ k^-1.1 over 8 products: product 1 ≈ 40%, product 2 ≈ 19%,
	// product 8 ≈ 4%. Loose bounds: 20 000 draws put each within ~1%.
	for k := 1; k < n; k++ {
		if count[0] <= count[k] {
			t.Errorf("zipfChoices: product 1 chosen %d times, product %d %d times; want product 1 the hottest (counts %v)", count[0], k+1, count[k], count)
		}
	}
	if share := float64(count[0]) / buyers; share < 0.35 || share > 0.45 {
		t.Errorf("zipfChoices: product 1's share %.3f, want about 0.40 for s=1.1 over 8 (counts %v)", share, count)
	}
	if count[1] <= count[n-1] || count[n-1] == 0 {
		t.Errorf("zipfChoices: counts %v, want product 2 above product 8 and every product chosen", count)
	}
	// Steeper exponent, hotter head.
	steep := zipfChoices(n, buyers, 3, 1)
	hot := 0
	for _, c := range steep {
		if c == 0 {
			hot++
		}
	}
	if hot <= count[0] {
		t.Errorf("zipfChoices(s=3): product 1 chosen %d times, want more than the %d of s=1.1", hot, count[0])
	}
	if again := zipfChoices(n, buyers, DefaultZipf, 1); !slices.Equal(again, choices) {
		t.Errorf("zipfChoices with the same seed differs: want the same demand for every row of a run")
	}
	if other := zipfChoices(n, buyers, DefaultZipf, 2); slices.Equal(other, choices) {
		t.Errorf("zipfChoices with seeds 1 and 2 are equal: want another demand for another run")
	}
	for i, c := range zipfChoices(MaxProducts, 5000, DefaultZipf, 7) {
		if c < 0 || c >= MaxProducts {
			t.Fatalf("zipfChoices(%d, …)[%d] = %d, out of range", MaxProducts, i, c)
		}
	}
}
