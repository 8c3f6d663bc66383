package postgres

import (
	"context"
	"fmt"
	"testing"

	"inventory/internal/inventory"
)

// BenchmarkOrderCounts measures one uncached count of the live page's 20
// products, each with b's orders in its current round, beside 100,000
// orders of other products (what a sequential scan would read too), with
// the index of migrations/00013 and without it.
//
//	go test -run '^$' -bench OrderCounts ./internal/postgres/
func BenchmarkOrderCounts(b *testing.B) {
	for _, perProduct := range []int{100, 5000} {
		for _, indexed := range []bool{true, false} {
			b.Run(fmt.Sprintf("orders=%d/indexed=%v", perProduct, indexed), func(b *testing.B) {
				st, pool := newStore(b)
				ctx := context.Background()
				var products []inventory.Product
				for i := range 21 {
					id := fmt.Sprintf("bench-%d", i)
					n := perProduct
					if i == 20 {
						n = 100_000 // not on the page
					}
					if _, err := pool.Exec(ctx, `INSERT INTO stock (product_id, name, quantity, initial, round) VALUES ($1, '', $2, $2, 1)`, id, n); err != nil {
						b.Fatal(err)
					}
					_, err := pool.Exec(ctx, `
						WITH s AS (
							INSERT INTO sales (product_id, round, quantity, strategy, instance)
							SELECT $1, 1, 1, 'atomic', 'bench' FROM generate_series(1, $2)
							RETURNING id)
						INSERT INTO orders (id, sale_id, product_id, round, quantity, state, expires_at)
						SELECT gen_random_uuid(), id, $1, 1, 1, (ARRAY['held','paid','shipped','cancelled','expired','refunded'])[1 + id % 6], now()
						FROM s`, id, n)
					if err != nil {
						b.Fatal(err)
					}
					if i < 20 {
						products = append(products, inventory.Product{ID: id, Round: 1})
					}
				}
				if !indexed {
					if _, err := pool.Exec(ctx, `DROP INDEX orders_product_round_state`); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := pool.Exec(ctx, `VACUUM ANALYZE orders`); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if _, err := st.countOrders(ctx, products); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
