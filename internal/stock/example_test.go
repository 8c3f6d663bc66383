package stock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/stock"
)

// ExampleNew builds one strategy and sells through it. It needs a migrated
// Postgres and a Redis, so it is compiled but not run.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/inventory?sslmode=disable")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	store := postgres.NewStore(pool, postgres.Limits{})
	if _, err := stock.Restock(ctx, store, rdb, "sku-1", "Hot item", 100); err != nil {
		fmt.Println(err)
		return
	}
	seller, err := stock.New(inventory.Lua, stock.Deps{Store: store, Redis: rdb, Instance: "replica-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	sale, err := seller.Sell(ctx, inventory.Order{ProductID: "sku-1", Quantity: 2, IdempotencyKey: "order-42"})
	switch {
	case errors.Is(err, inventory.ErrSoldOut):
		fmt.Println("sold out")
	case err != nil:
		fmt.Println("try again later:", err)
	default:
		fmt.Printf("sale %d: %d left\n", sale.ID, sale.Remaining)
	}
}
