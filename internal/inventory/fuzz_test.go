package inventory_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"inventory/internal/inventory"
)

// productIDRule is the design's product id rule as a regexp, not
// ValidateProductID's loop: 1–64 characters, each an ASCII letter or digit,
// '-', '_' or '.'.
var productIDRule = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`).MatchString

func FuzzValidateProductID(f *testing.F) {
	for _, seed := range []string{
		"sku-1", "a", "A.b_c-9", "...", strings.Repeat("z", 64), strings.Repeat("z", 65),
		"", "sku 1", "sku-1\n", "sku-1\x00", "lock:{sku}", "sku/1", "ßku", "sku-١", "Ｓku",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := inventory.ValidateProductID(id)
		switch want := productIDRule(id); {
		case want && err != nil:
			t.Fatalf("ValidateProductID(%q) = %v, want nil", id, err)
		case !want && err == nil:
			t.Fatalf("ValidateProductID(%q) = nil, want ErrBadProductID", id)
		case !want && !errors.Is(err, inventory.ErrBadProductID):
			t.Fatalf("ValidateProductID(%q) = %v, want it to wrap ErrBadProductID", id, err)
		}
	})
}
