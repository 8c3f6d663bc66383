package cpuprof

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"inventory/internal/client"
)

// Kind is one kind of request a measurement drives: what each client
// sends, which answer is the expected one, and how the fleet is prepared
// for it (the product restocked).
type Kind struct {
	// Name is the kind's key in the report: "healthz", "sold-out", or the
	// strategy of a sale.
	Name string
	// Title is its row's name in the table: "GET /healthz", "sold-out 409",
	// "atomic sale".
	Title string
	// Strategy is the strategy that answers it: a sale's, or, for the
	// sold-out answer, the fleet default (read when it is prepared).
	Strategy string

	method, path string
	body         []byte
	admin        bool
	expect       string // the expected answer's status: "200", "409", "2xx"
	prepare      func(ctx context.Context, c *client.Client, k *Kind) error
}

// Healthz is GET /healthz: the floor, the cost of an answer that does
// nothing but pass nginx and a replica.
func Healthz() Kind {
	return Kind{Name: "healthz", Title: "GET /healthz", method: http.MethodGet, path: "/healthz",
		expect: "200"}
}

// SoldOut is a buyer's POST /sale of one unit of product, restocked to 0
// first: every answer a 409 sold-out, from the fleet default strategy (no
// strategy named, as a buyer sends it).
func SoldOut(product string) Kind {
	return Kind{Name: "sold-out", Title: "sold-out 409", method: http.MethodPost, path: "/sale",
		body:   saleBody(product),
		expect: "409",
		prepare: func(ctx context.Context, c *client.Client, k *Kind) error {
			if _, err := c.Restock(ctx, product, client.RestockRequest{Quantity: 0}); err != nil {
				return fmt.Errorf("restock %s to 0: %w", product, err)
			}
			s, err := c.Strategy(ctx)
			if err != nil {
				return fmt.Errorf("the fleet default strategy: %w", err)
			}
			k.Strategy = s
			return nil
		}}
}

// SaleStock is what a sale's product is restocked to before its window:
// far more than a window sells, so that every answer is a sale.
const SaleStock = 1_000_000_000

// Sale is POST /sale?strategy=NAME of one unit of product (an admin call:
// it names the strategy), restocked to SaleStock first: every answer a
// 2xx sale.
func Sale(strategy, product string) Kind {
	return Kind{Name: strategy, Title: strategy + " sale", Strategy: strategy, method: http.MethodPost,
		path: "/sale?strategy=" + url.QueryEscape(strategy), body: saleBody(product), admin: true,
		expect: "2xx",
		prepare: func(ctx context.Context, c *client.Client, _ *Kind) error {
			if _, err := c.Restock(ctx, product, client.RestockRequest{Quantity: SaleStock}); err != nil {
				return fmt.Errorf("restock %s: %w", product, err)
			}
			return nil
		}}
}

func saleBody(product string) []byte {
	b, _ := json.Marshal(client.SaleRequest{ProductID: product, Quantity: 1}) // a string and a number: cannot fail
	return b
}
