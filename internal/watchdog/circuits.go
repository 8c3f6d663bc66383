package watchdog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Circuit is an open circuit: a product whose sales are stopped, and why.
type Circuit struct {
	Violation
	OpenedAt time.Time
	OpenedBy string
}

// Err is the error a refused sale gets: ErrCircuitOpen with the evidence.
func (c Circuit) Err() error {
	return fmt.Errorf("%w: %s (seen by %s at %s); an admin closes it with POST /products/%s/circuit, a restock starts a new round",
		ErrCircuitOpen, c.Violation, c.OpenedBy, c.OpenedAt.UTC().Format(time.RFC3339), c.Product)
}

// Circuits is the fleet's sale circuits, kept in Postgres (table circuits),
// and this replica's copy of the open ones, which the sale path reads
// without a round trip. A circuit opened by another replica is seen here at
// the next Refresh.
type Circuits struct {
	pool   *pgxpool.Pool
	opened atomic.Pointer[map[string]Circuit]
}

// NewCircuits returns the circuits kept in pool's database; none is open
// until the first Refresh.
func NewCircuits(pool *pgxpool.Pool) *Circuits {
	c := &Circuits{pool: pool}
	c.opened.Store(&map[string]Circuit{})
	return c
}

// Open reports whether product's circuit is open in this replica's copy,
// and why (the sale path asks Refuses).
func (c *Circuits) Open(product string) (Circuit, bool) {
	if c == nil {
		return Circuit{}, false
	}
	oc, ok := (*c.opened.Load())[product]
	return oc, ok
}

// Refuses reports whether product's sales are to be refused, and why: its
// circuit is open here and, in Postgres, still open and covering the
// product's current round. A restock or an admin's close through another
// replica is learnt here, at every refused sale (only while a circuit is
// open: one indexed read), not at the next Refresh, so once either is
// answered no replica refuses the product. When Postgres cannot be asked,
// the circuit stays open: refusing is safe.
func (c *Circuits) Refuses(ctx context.Context, product string) (Circuit, bool) {
	oc, open := c.Open(product)
	if !open {
		return Circuit{}, false
	}
	var stillOpen bool
	err := c.pool.QueryRow(ctx, `
		SELECT coalesce(c.open AND c.round = s.round, false)
		FROM stock s LEFT JOIN circuits c ON c.product_id = s.product_id
		WHERE s.product_id = $1`, product).Scan(&stillOpen)
	if err == nil && !stillOpen {
		c.set(product, nil)
		return Circuit{}, false
	}
	return oc, true
}

// Refresh reloads the open circuits of the products' current rounds and
// returns their products, sorted.
func (c *Circuits) Refresh(ctx context.Context) ([]string, error) {
	rows, err := c.pool.Query(ctx, `
		SELECT c.product_id, c.round, c.kind, c.quantity, c.initial, c.sold, c.opened_at, c.opened_by
		FROM circuits c JOIN stock s ON s.product_id = c.product_id AND s.round = c.round
		WHERE c.open`)
	if err != nil {
		return nil, fmt.Errorf("circuits: read: %w", err)
	}
	open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Circuit, error) {
		var oc Circuit
		err := r.Scan(&oc.Product, &oc.Round, &oc.Kind, &oc.Quantity, &oc.Initial, &oc.Sold, &oc.OpenedAt, &oc.OpenedBy)
		return oc, err
	})
	if err != nil {
		return nil, fmt.Errorf("circuits: read: %w", err)
	}
	m := make(map[string]Circuit, len(open))
	products := make([]string, 0, len(open))
	for _, oc := range open {
		m[oc.Product] = oc
		products = append(products, oc.Product)
	}
	c.opened.Store(&m)
	sort.Strings(products)
	return products, nil
}

// open opens v.Product's circuit for evidence v unless that evidence was
// already recorded (open, or closed by an admin who saw it), and reports
// whether it did. Here too at once, not only at the next Refresh.
func (c *Circuits) open(ctx context.Context, v Violation, by string) (bool, error) {
	var oc Circuit
	err := c.pool.QueryRow(ctx, `
		INSERT INTO circuits AS c (product_id, round, kind, quantity, initial, sold, open, opened_at, opened_by)
		VALUES ($1, $2, $3, $4, $5, $6, true, now(), $7)
		ON CONFLICT (product_id) DO UPDATE
		SET round = EXCLUDED.round, kind = EXCLUDED.kind, quantity = EXCLUDED.quantity, initial = EXCLUDED.initial,
		    sold = EXCLUDED.sold, open = true, opened_at = EXCLUDED.opened_at, opened_by = EXCLUDED.opened_by, closed_at = NULL
		WHERE (c.round, c.quantity, c.initial, c.sold) IS DISTINCT FROM (EXCLUDED.round, EXCLUDED.quantity, EXCLUDED.initial, EXCLUDED.sold)
		RETURNING opened_at, opened_by`,
		v.Product, v.Round, v.Kind, v.Quantity, v.Initial, v.Sold, by).Scan(&oc.OpenedAt, &oc.OpenedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("circuits: open %q: %w", v.Product, err)
	}
	oc.Violation = v
	c.set(v.Product, &oc)
	return true, nil
}

// Close closes product's circuit for the fleet (the others stop refusing at
// their next Refresh) and returns the circuit it closed; ok is false when
// none was open. The evidence stays recorded: only new evidence opens it
// again.
func (c *Circuits) Close(ctx context.Context, product string) (closed Circuit, ok bool, err error) {
	err = c.pool.QueryRow(ctx, `
		UPDATE circuits SET open = false, closed_at = now()
		WHERE product_id = $1 AND open
		RETURNING product_id, round, kind, quantity, initial, sold, opened_at, opened_by`, product).
		Scan(&closed.Product, &closed.Round, &closed.Kind, &closed.Quantity, &closed.Initial, &closed.Sold, &closed.OpenedAt, &closed.OpenedBy)
	c.set(product, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return Circuit{}, false, nil
	}
	if err != nil {
		return Circuit{}, false, fmt.Errorf("circuits: close %q: %w", product, err)
	}
	return closed, true, nil
}

// Forget drops product from this replica's copy (a restock here started a
// round no circuit covers yet); Postgres's rows are left to Refresh.
func (c *Circuits) Forget(product string) {
	if c != nil {
		c.set(product, nil)
	}
}

// set puts oc (nil: none) in this replica's copy of the open circuits.
func (c *Circuits) set(product string, oc *Circuit) {
	for {
		old := c.opened.Load()
		m := make(map[string]Circuit, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
		if oc == nil {
			delete(m, product)
		} else {
			m[product] = *oc
		}
		if c.opened.CompareAndSwap(old, &m) {
			return
		}
	}
}
