package stock_test

import (
	"errors"
	"strings"
	"testing"

	"inventory/internal/stock"
)

// productIDRule is the design's product id rule written out by hand, not
// with ValidateProductID's regexp: 1–64 characters, each a letter or digit
// of ASCII, '-', '_' or '.'.
func productIDRule(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		letter := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		digit := '0' <= c && c <= '9'
		if !letter && !digit && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func FuzzValidateProductID(f *testing.F) {
	for _, seed := range []string{
		"sku-1", "a", "A.b_c-9", "...", strings.Repeat("z", 64), strings.Repeat("z", 65),
		"", "sku 1", "sku-1\n", "sku-1\x00", "lock:{sku}", "sku/1", "ßku", "sku-١", "Ｓku",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := stock.ValidateProductID(id)
		switch want := productIDRule(id); {
		case want && err != nil:
			t.Fatalf("ValidateProductID(%q) = %v, want nil", id, err)
		case !want && err == nil:
			t.Fatalf("ValidateProductID(%q) = nil, want ErrBadProductID", id)
		case !want && !errors.Is(err, stock.ErrBadProductID):
			t.Fatalf("ValidateProductID(%q) = %v, want it to wrap ErrBadProductID", id, err)
		}
	})
}
