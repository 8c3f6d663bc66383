package watchdog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
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
	opened atomic.Pointer[map[string]*openCircuit]
	// recheck is how often, at most, a refused sale asks Postgres whether
	// its product's circuit is still open (RecheckInterval).
	recheck time.Duration
	now     func() time.Time // time.Now; a test's clock
	// heard is when a restock of each product was last heard of (Recheck,
	// unix nanoseconds): a Refresh under way meanwhile may have read a
	// circuit of the round the restock ended.
	heard sync.Map
}

// openCircuit is an open circuit in this replica's copy, and when Postgres
// last said it was open.
type openCircuit struct {
	Circuit
	checked atomic.Int64 // unix nanoseconds of the last look at Postgres

	mu   sync.Mutex
	look *look // the look at Postgres under way, nil when none
	last *look // the last look that ended, nil when none since Refresh or Recheck
}

// look is one look at Postgres whether a circuit is still open, which the
// refused sales that come while it is under way wait for and share.
type look struct {
	done chan struct{}
	open bool // set before done closes
}

// readOpen is the answer of a look that has not been made: Refresh has
// just read the circuit open.
var readOpen = func() *look {
	l := &look{done: make(chan struct{}), open: true}
	close(l.done)
	return l
}()

// join returns the look under way at oc; else, when the last look began
// less than every ago (at now, unix nanoseconds), that look, whose answer
// stands; else a new one that the caller makes (start).
func (oc *openCircuit) join(now, every int64) (l *look, start bool) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	switch {
	case oc.look != nil:
		return oc.look, false
	case now-oc.checked.Load() < every && oc.last != nil:
		return oc.last, false
	case now-oc.checked.Load() < every:
		return readOpen, false
	}
	oc.checked.Store(now)
	oc.look = &look{done: make(chan struct{})}
	return oc.look, true
}

// finish ends l, which found the circuit open or not.
func (oc *openCircuit) finish(l *look, open bool) {
	l.open = open
	close(l.done)
	oc.mu.Lock()
	if oc.look == l {
		oc.look, oc.last = nil, l
	}
	oc.mu.Unlock()
}

// RecheckInterval is how often, at most, a replica asks Postgres whether
// an open circuit is still open when its product's sales keep coming: a
// restock or an admin's close through another replica stops the refusals
// here within it (or at the watchdog's next Refresh, if sooner).
const RecheckInterval = 100 * time.Millisecond

// NewCircuits returns the circuits kept in pool's database; none is open
// until the first Refresh.
func NewCircuits(pool *pgxpool.Pool) *Circuits {
	c := &Circuits{pool: pool, recheck: RecheckInterval, now: time.Now}
	c.opened.Store(&map[string]*openCircuit{})
	return c
}

// Open reports whether product's circuit is open in this replica's copy,
// and why (the sale path asks Refuses).
func (c *Circuits) Open(product string) (Circuit, bool) {
	if c == nil {
		return Circuit{}, false
	}
	oc, ok := (*c.opened.Load())[product]
	if !ok {
		return Circuit{}, false
	}
	return oc.Circuit, true
}

// Refuses reports whether product's sales are to be refused, and why: its
// circuit is open here and, as Postgres said at most RecheckInterval ago,
// still open and covering the product's current round. Refusals answer
// from memory: a crowd of buyers of a broken product costs one indexed
// read per RecheckInterval, made by the first refused buyer who finds the
// last look older than that; the buyers that come while it is under way
// wait for its answer and share it (one query at a time per product, so a
// crowd cannot hold up the watchdog's checks of the other products on
// their shared pool). A restock heard of (Recheck) makes the next sale
// look at once; an admin's close through another replica, or a restock
// whose announcement was lost, is learnt here within RecheckInterval of
// the next sale, or at the next Refresh. When Postgres cannot be asked,
// the circuit stays open: refusing is safe.
func (c *Circuits) Refuses(ctx context.Context, product string) (Circuit, bool) {
	if c == nil {
		return Circuit{}, false
	}
	oc, open := (*c.opened.Load())[product]
	if !open {
		return Circuit{}, false
	}
	l, start := oc.join(c.now().UnixNano(), c.recheck.Nanoseconds())
	if start {
		// Not the buyer's own context: the others wait for this answer.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
		var stillOpen bool
		err := c.pool.QueryRow(qctx, `
			SELECT coalesce(c.open AND c.round = s.round, false)
			FROM stock s LEFT JOIN circuits c ON c.product_id = s.product_id
			WHERE s.product_id = $1`, product).Scan(&stillOpen)
		cancel()
		if err == nil && !stillOpen {
			c.drop(product, oc)
		}
		oc.finish(l, err != nil || stillOpen)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return oc.Circuit, true
	}
	if !l.open {
		return Circuit{}, false
	}
	return oc.Circuit, true
}

// lookTimeout bounds one look at Postgres whether a circuit is still open.
const lookTimeout = 2 * time.Second

// Refresh reloads the open circuits of the products' current rounds and
// returns their products, sorted.
func (c *Circuits) Refresh(ctx context.Context) ([]string, error) {
	start := c.now()
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
	m := make(map[string]*openCircuit, len(open))
	products := make([]string, 0, len(open))
	had := *c.opened.Load()
	for _, oc := range open {
		products = append(products, oc.Product)
		// A circuit this replica has already keeps its looks: a Recheck
		// made while this read was under way (a restock that committed
		// meanwhile) still stands.
		if o := had[oc.Product]; o != nil && o.Round == oc.Round && o.OpenedAt.Equal(oc.OpenedAt) {
			m[oc.Product] = o
			continue
		}
		// A restock heard of since this read began may have committed
		// after it: that circuit is not looked at yet (the first refused
		// sale looks), or it would refuse the new round's buyers from
		// memory for up to RecheckInterval (a fleet's atomic run right
		// after a restock had 15 of 60 buyers refused so).
		at := start
		if h, ok := c.heard.Load(oc.Product); ok && h.(int64) >= start.UnixNano() {
			at = time.Time{}
		}
		m[oc.Product] = c.looked(oc, at)
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
	// Not looked at yet: a restock may have started another round since
	// the check read this one, and its announcement come before this (so
	// Recheck found nothing to recheck); the first refused sale looks.
	c.set(v.Product, c.looked(oc, time.Time{}))
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

// Recheck makes the next refused sale of product ask Postgres whether its
// circuit is still open, however lately it was asked: a restock was
// announced (stock.SoldOut.OnRestock), and its round no circuit covers.
func (c *Circuits) Recheck(product string) {
	if c == nil {
		return
	}
	c.heard.Store(product, c.now().UnixNano())
	if oc, open := (*c.opened.Load())[product]; open {
		// A look under way may have begun before the restock committed:
		// the next sale begins another rather than share its answer.
		oc.mu.Lock()
		oc.checked.Store(0)
		oc.look, oc.last = nil, nil
		oc.mu.Unlock()
	}
}

// looked is oc as Postgres showed it at at (the zero time: not yet).
func (c *Circuits) looked(oc Circuit, at time.Time) *openCircuit {
	o := &openCircuit{Circuit: oc}
	if !at.IsZero() { // never looked at: 0, not the zero time's undefined UnixNano
		o.checked.Store(at.UnixNano())
	}
	return o
}

// set puts oc (nil: none) in this replica's copy of the open circuits.
func (c *Circuits) set(product string, oc *openCircuit) {
	c.swap(func(m map[string]*openCircuit) {
		if oc == nil {
			delete(m, product)
		} else {
			m[product] = oc
		}
	})
}

// drop removes product's circuit from this replica's copy if it is still
// oc: one that a Refresh or the watchdog put there since is newer news.
func (c *Circuits) drop(product string, oc *openCircuit) {
	c.swap(func(m map[string]*openCircuit) {
		if m[product] == oc {
			delete(m, product)
		}
	})
}

// swap replaces this replica's copy of the open circuits by a copy that
// change changed.
func (c *Circuits) swap(change func(map[string]*openCircuit)) {
	for {
		old := c.opened.Load()
		m := make(map[string]*openCircuit, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
		change(m)
		if c.opened.CompareAndSwap(old, &m) {
			return
		}
	}
}
