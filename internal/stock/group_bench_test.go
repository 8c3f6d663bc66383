package stock

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/testenv"
	"inventory/migrations"
)

// BenchmarkSellProducts sells through one replica's seller, without HTTP,
// to 64 buyers at once choosing among 1 or 1,000 products by Zipf
// (s = 1.1), the shapes of loadtest --products 1 and 1000: it reports
// sales/s and the sales per transaction the ledger shows (each row carries
// its writer's xmin). One op is one sale.
//
//	go test -run '^$' -bench SellProducts -benchtime 20000x ./internal/stock/
func BenchmarkSellProducts(b *testing.B) {
	ctx := context.Background()
	pgURL := testenv.PostgresURL(b)
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 32 // as a replica's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	if err := migrations.Up(ctx, db); err != nil {
		b.Fatal(err)
	}
	_ = db.Close()
	opts, err := goredis.ParseURL(testenv.RedisURL(b))
	if err != nil {
		b.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	store := postgres.NewStore(pool, postgres.Limits{})

	const buyers = 64
	for _, products := range []int{1, 1000} {
		for _, name := range []string{inventory.Batch, inventory.Atomic} {
			b.Run(fmt.Sprintf("products=%d/%s", products, name), func(b *testing.B) {
				ids := make([]string, products)
				for i := range ids {
					ids[i] = fmt.Sprintf("bench-%d-%s-%d", products, name, i)
					if _, err := Restock(ctx, store, rdb, ids[i], "", int64(b.N)); err != nil {
						b.Fatal(err)
					}
				}
				s, err := New(name, Deps{Store: store, Redis: rdb, Instance: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				var firstID int64
				if err := pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM sales`).Scan(&firstID); err != nil {
					b.Fatal(err)
				}
				orders := make(chan inventory.Order, b.N)
				zipf := rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, uint64(products-1))
				for range b.N {
					orders <- inventory.Order{ProductID: ids[zipf.Uint64()], Quantity: 1}
				}
				close(orders)
				var wg sync.WaitGroup
				errs := make(chan error, buyers)
				b.ResetTimer()
				start := time.Now()
				for range buyers {
					wg.Go(func() {
						for o := range orders {
							if _, err := s.Sell(ctx, o); err != nil {
								errs <- fmt.Errorf("Sell(ctx, %s) = %w", formatOrder(o), err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				var rows, transactions float64
				if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM sales WHERE id > $1`, firstID).
					Scan(&rows, &transactions); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sales/s")
				b.ReportMetric(rows/max(transactions, 1), "sales/tx")
			})
		}
	}
}
