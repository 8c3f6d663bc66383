package faults

import (
	"context"
	"fmt"

	"inventory/internal/client"
)

// RestockRace is restock-race: while a sale is inside its critical
// section, an admin restocks the product (PUT /products/{id}) to its
// initial stock, starting a new round; in-flight sales land in the round
// whose stock they decremented.
type RestockRace struct{}

// Name implements Fault.
func (*RestockRace) Name() string { return "restock-race" }

// Scope implements Scoped.
func (*RestockRace) Scope() Scope { return ScopeProduct }

// Inject implements Fault.
func (*RestockRace) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	c := t.Fleet.Client()
	p, err := c.Product(ctx, t.Product)
	if err != nil {
		return fmt.Errorf("restock-race: %w", err)
	}
	if _, err := c.Restock(ctx, t.Product, client.RestockRequest{Quantity: p.Initial}); err != nil {
		return fmt.Errorf("restock-race: %w", err)
	}
	return nil
}

// Heal implements Fault: a restock needs no healing.
func (*RestockRace) Heal(context.Context) error { return nil }
