package load

import (
	"context"
	"fmt"
	"inventory/internal/verdict"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Limits and default of --products and --zipf.
const (
	MaxProducts = 10000
	DefaultZipf = 1.1
	// MaxProductID is the service's limit on a product id's length.
	MaxProductID = 64
)

// productIDs is the products a run sells: cfg.Product alone, or
// "<Product>-1" … "<Product>-N" with cfg.Products = N above 1, the first
// the hottest.
func productIDs(cfg Config) []string {
	if cfg.Products <= 1 {
		return []string{cfg.Product}
	}
	ids := make([]string, cfg.Products)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", cfg.Product, i+1)
	}
	return ids
}

// zipfChoices returns, for each of buyers buyers, the index of the product
// it buys among n: Zipf-distributed with exponent s (> 1) and v = 1, index
// 0 the most likely, P(k) ∝ (1+k)^−s. The same seed gives the same
// choices, so every row of one run faces the same demand whatever the
// order its workers take the buyers in.
func zipfChoices(n, buyers int, s float64, seed uint64) []int32 {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), s, 1, uint64(n-1))
	out := make([]int32, buyers)
	for i := range out {
		out[i] = int32(z.Uint64())
	}
	return out
}

// forEachProduct calls fn for every index of ids, at most parallel at
// once, and returns the first error; after one, the calls not yet started
// are skipped.
func forEachProduct(ctx context.Context, ids []string, parallel int, fn func(ctx context.Context, i int, id string) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(parallel, len(ids))) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := fn(ctx, i, ids[i]); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// adminParallel bounds the restocks and reads a many-product run sends at
// once: enough to restock thousands of products in seconds, few enough to
// leave the fleet's connection pools to the buyers.
func adminParallel(concurrency int) int { return max(1, min(concurrency, 16)) }

// ProductResult is one product of a many-product run (--products),
// checked on its own exactly as a single product is; --json writes it.
type ProductResult struct {
	Product     string                `json:"product"`
	Round       int64                 `json:"round"`  // the product's current round after the run
	Buyers      int64                 `json:"buyers"` // buyers who picked this product
	Initial     int64                 `json:"initial"`
	FinalStock  int64                 `json:"final_stock"`
	LedgerUnits int64                 `json:"ledger_units"`
	LedgerRows  int64                 `json:"ledger_rows"`
	OK          int64                 `json:"ok_2xx"`
	SoldOut     int64                 `json:"sold_out_409"`
	Unavailable int64                 `json:"unavailable_503"`
	Oversold    int64                 `json:"oversold"`
	LostUpdates int64                 `json:"lost_updates"`
	Undersold   int64                 `json:"undersold"`
	Rounds      []verdict.RoundResult `json:"rounds,omitempty"` // with --restock-during: every round, each checked on its own
	// Broken is true when the product broke an invariant (also for an
	// unsafe strategy, where overselling is expected).
	Broken bool `json:"broken,omitempty"`
}
