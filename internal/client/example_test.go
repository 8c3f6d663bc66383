package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"inventory/internal/client"
)

func ExampleClient_Sell() {
	c := client.New("http://127.0.0.1:8080", client.Options{})
	sale, err := c.Sell(context.Background(), client.SaleRequest{ProductID: "sku-1", Quantity: 1}, client.SaleOptions{})
	var p *client.Problem
	switch {
	case errors.As(err, &p) && p.Slug() == "sold-out":
		fmt.Println("sold out, says", p.Instance)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("sale %d of round %d by %s\n", sale.SaleID, sale.Round, sale.Instance)
	}
}

// A buyer who may send its order again gives it an Idempotency-Key: a
// retry after a 503 or a lost answer then never buys twice.
func ExampleRetry_Do() {
	c := client.New("http://127.0.0.1:8080", client.Options{})
	order := client.SaleRequest{ProductID: "sku-1", Quantity: 1}
	opts := client.SaleOptions{IdempotencyKey: "order-7f3a"}
	sale, retries, err := client.Retry{Max: 3}.Do(context.Background(), func(ctx context.Context) (client.Sale, error) {
		return c.Sell(ctx, order, opts)
	})
	if err != nil {
		log.Fatalf("after %d retries: %v", retries, err)
	}
	fmt.Println("sale", sale.SaleID, "replayed:", sale.Replayed)
}

func ExampleNew() {
	admin := client.New("http://127.0.0.1:8080", client.Options{AdminToken: "the INVENTORY_ADMIN_TOKEN"})
	p, err := admin.Restock(context.Background(), "sku-1", client.RestockRequest{Quantity: 1000, Name: "Hot thing"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("round", p.Round, "of", p.ProductID, "with", p.Quantity)
}
