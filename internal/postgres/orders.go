package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// An order's life after a hold (see inventory.OrderState). Every step is
// decided by a guarded write: the UPDATE names the state it leaves (and,
// to pay, the deadline not yet passed), so of two steps racing for one
// order, say a payment and the expiry job at the deadline, Postgres lets
// exactly one through, whatever locks the callers took. An order's units
// come back by a row of returns, whose primary key is the order: at most
// once, whoever writes it. Locks are taken in one order, so that no two
// of these transactions wait for each other in a circle: the expiry job's
// fence, the orders, the stock row, the round's totals (a sale takes the
// last two in that order too).

// Reopen makes every replica drop its sold-out marks of product id for
// rounds up to round, and returns once none is recorded and running: a
// return calls it in its own transaction, with the product's stock row
// locked, before the units go back, so that no replica answers "sold out"
// from memory once the return has been answered.
type Reopen func(ctx context.Context, tx *RoundTx, id string, round int) error

// ExpiryJob is the expiry sweep's name in job_fences.
const ExpiryJob = "order-expiry"

// Order returns order id with its history.
func (s *Store) Order(ctx context.Context, id string) (inventory.OrderRecord, error) {
	if err := inventory.ValidateOrderID(id); err != nil {
		return inventory.OrderRecord{}, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT o.id::text, o.sale_id, o.product_id, o.quantity, o.round, o.state, o.expires_at,
		       e.state, e.at, e.by
		FROM orders o JOIN order_events e ON e.order_id = o.id
		WHERE o.id = $1
		ORDER BY e.at, e.state`, id)
	if err != nil {
		return inventory.OrderRecord{}, dbErr("read order", err)
	}
	var r inventory.OrderRecord
	var e inventory.OrderEvent
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.SaleID, &r.ProductID, &r.Quantity, &r.Round, &r.State, &r.ExpiresAt,
		&e.State, &e.At, &e.By}, func() error {
		r.History = append(r.History, e)
		return nil
	})
	if err != nil {
		return inventory.OrderRecord{}, dbErr("read order", err)
	}
	if r.ID == "" {
		return inventory.OrderRecord{}, fmt.Errorf("order %s: %w", id, inventory.ErrOrderNotFound)
	}
	return r, nil
}

// Transition takes step a (pay, cancel, refund or ship) of order id, asked
// through instance by: one transaction whose guarded UPDATE decides it,
// which records the state entered and, for a cancel or a refund, gives
// the units back (see giveBack, reopen). It returns the order as it is
// after the step.
//
// A step the order already took (a retried cancel, say) answers the order
// as it is, changing nothing. A payment after the deadline, or of an order
// the expiry job took, is ErrOrderExpired; any other step the state does
// not allow is ErrOrderState. Neither changes anything.
func (s *Store) Transition(ctx context.Context, id string, a inventory.Action, by string, reopen Reopen) (inventory.OrderRecord, error) {
	if err := inventory.ValidateOrderID(id); err != nil {
		return inventory.OrderRecord{}, err
	}
	if _, err := inventory.ParseAction(string(a)); err != nil || a == inventory.Expire {
		return inventory.OrderRecord{}, fmt.Errorf("%w: %q is not a step a caller may take", inventory.ErrBadAction, a)
	}
	took, err := s.transitionOnce(ctx, id, a, by, reopen)
	if err != nil {
		return inventory.OrderRecord{}, err
	}
	r, err := s.Order(ctx, id)
	if err != nil || took {
		return r, err
	}
	switch {
	case r.Entered(a.To()):
		return r, nil // a repeat: the step was taken before
	case a == inventory.Pay && (r.State == inventory.Expired || r.State == inventory.Held):
		return r, fmt.Errorf("%w: order %s was due by %s (state %s)", inventory.ErrOrderExpired, id, r.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"), r.State)
	default:
		return r, fmt.Errorf("%w: order %s is %s; %s needs %s", inventory.ErrOrderState, id, r.State, a, a.From())
	}
}

// transitionOnce is Transition's transaction; took is false when the
// guard let nothing through (and nothing was written).
func (s *Store) transitionOnce(ctx context.Context, id string, a inventory.Action, by string, reopen Reopen) (took bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return false, dbErr("begin order step", err)
	}
	defer rollback(ctx, tx)
	var o heldUnits
	err = tx.QueryRow(ctx, `
		UPDATE orders SET state = $2, updated_at = now()
		WHERE id = $1 AND state = $3 AND ($4 <> 'pay' OR expires_at > now())
		RETURNING id::text, product_id, round, quantity`, id, a.To(), a.From(), a).
		Scan(&o.order, &o.product, &o.round, &o.quantity)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("order step", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO order_events (order_id, state, by) VALUES ($1, $2, $3)`, id, a.To(), by); err != nil {
		return false, dbErr("record order step", err)
	}
	if a.Returns() {
		if err := giveBack(ctx, tx, o.product, []heldUnits{o}, a.To(), reopen); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, commitErr(err)
	}
	return true, nil
}

// heldUnits are an order's units on their way back.
type heldUnits struct {
	order    string
	product  string
	round    int
	quantity int64
}

// giveBack returns the units of orders, all of product id, which left
// state held or paid for reason (cancelled, expired, refunded) in tx: a
// row of returns each (at most one per order: its primary key), and the
// units back into the stock for the orders of the current round, after
// reopen has made the replicas forget that the product was sold out. An
// order of a round a restock has ended returns nothing to the new round's
// stock (restored false): the restock set that round's stock afresh.
func giveBack(ctx context.Context, tx pgx.Tx, id string, orders []heldUnits, reason inventory.OrderState, reopen Reopen) error {
	var round int
	if err := tx.QueryRow(ctx, `SELECT round FROM stock WHERE product_id = $1 FOR UPDATE`, id).Scan(&round); err != nil {
		return dbErr("lock stock row for a return", err)
	}
	var restored int64
	ids, quantities, rounds, back := make([]string, len(orders)), make([]int64, len(orders)), make([]int64, len(orders)), make([]bool, len(orders))
	for i, o := range orders {
		ids[i], quantities[i], rounds[i], back[i] = o.order, o.quantity, int64(o.round), o.round == round
		if back[i] {
			restored += o.quantity
		}
	}
	if restored > 0 && reopen != nil {
		if err := reopen(ctx, &RoundTx{tx: tx}, id, round); err != nil {
			return fmt.Errorf("return %d units of %q: %w", restored, id, err)
		}
	}
	_, err := tx.Exec(ctx, `
		WITH r AS (
			INSERT INTO returns (order_id, product_id, round, quantity, reason, restored)
			SELECT o, $1, rd, q, $5, b FROM unnest($2::uuid[], $3::bigint[], $4::int[], $6::bool[]) AS t(o, q, rd, b)
			RETURNING quantity, restored
		), s AS (
			UPDATE stock SET quantity = quantity + $7, version = version + 1, updated_at = now()
			WHERE product_id = $1 AND $7 > 0
		)
		UPDATE round_totals SET returned = returned + $7
		WHERE product_id = $1 AND round = $8 AND $7 > 0`,
		id, ids, quantities, rounds, reason, back, restored, round)
	if isUniqueViolation(err, "returns_pkey") {
		return fmt.Errorf("%w: an order's units were already returned: %w", inventory.ErrOrderState, err)
	}
	if err != nil {
		return dbErr("return units", err)
	}
	return nil
}

// ExpireDue expires the held orders whose deadline has passed, up to limit
// per product, and gives their units back, as the expiry job's runner
// holding fence (its lease's fencing token). It first claims the job's
// fence in a transaction of its own: when a runner with a newer token has
// claimed it, this one's lease is over, and the sweep is refused
// (ErrLockBreach with ErrLockLost) before it writes anything. Then each
// due product's orders are expired in one transaction, up to sweepParallel
// at once (one product whose return waits — on its hot stock row, or on a
// replica's sold-out mark — does not hold back the others), each holding
// the fence row shared and refused likewise if a newer claim got in first:
// a newer runner's claim waits until these transactions end, and this
// runner's later ones see it and write nothing. Orders being paid or
// cancelled at that moment are skipped (their step decides them; the next
// sweep takes those still due). It returns how many orders it expired, and
// the errors.
func (s *Store) ExpireDue(ctx context.Context, fence lock.Fence, by string, limit int, reopen Reopen) (int, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT product_id FROM orders WHERE state = 'held' AND expires_at <= now() LIMIT 1000`)
	if err != nil {
		return 0, dbErr("find due orders", err)
	}
	products, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, dbErr("find due orders", err)
	}
	if len(products) == 0 {
		return 0, nil
	}
	if err := s.claimJob(ctx, ExpiryJob, fence); err != nil {
		return 0, err
	}
	var (
		expired atomic.Int64
		mu      sync.Mutex
		errs    []error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, sweepParallel)
	)
	for _, id := range products {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			n, err := s.expireProduct(ctx, id, fence, by, limit, reopen)
			expired.Add(int64(n))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return int(expired.Load()), errors.Join(errs...)
}

// sweepParallel is how many products' due orders ExpireDue expires at
// once, each in a transaction and a connection of its own.
const sweepParallel = 4

// expireProduct is one of ExpireDue's transactions: product id's due orders.
func (s *Store) expireProduct(ctx context.Context, id string, fence lock.Fence, by string, limit int, reopen Reopen) (int, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return 0, dbErr("begin expiry", err)
	}
	defer rollback(ctx, tx)
	if err := checkJob(ctx, tx, ExpiryJob, fence); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `
		UPDATE orders SET state = 'expired', updated_at = now()
		WHERE id IN (
			SELECT id FROM orders
			WHERE product_id = $1 AND state = 'held' AND expires_at <= now()
			ORDER BY expires_at LIMIT $2
			FOR UPDATE SKIP LOCKED)
		AND state = 'held'
		RETURNING id::text, product_id, round, quantity`, id, limit)
	if err != nil {
		return 0, dbErr("expire orders", err)
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (heldUnits, error) {
		var o heldUnits
		err := row.Scan(&o.order, &o.product, &o.round, &o.quantity)
		return o, err
	})
	if err != nil {
		return 0, dbErr("expire orders", err)
	}
	if len(due) == 0 {
		return 0, nil
	}
	ids := make([]string, len(due))
	for i, o := range due {
		ids[i] = o.order
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO order_events (order_id, state, by, fence)
		SELECT o, 'expired', $2, nullif($3::bigint, 0) FROM unnest($1::uuid[]) AS o`, ids, by, fence.Token); err != nil {
		return 0, dbErr("record expiry", err)
	}
	if err := giveBack(ctx, tx, id, due, inventory.Expired, reopen); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, commitErr(err)
	}
	return len(due), nil
}

// claimJob raises job's fence row to fence, in a transaction of its own:
// refused when a runner with a newer token of the same counter claimed it
// (ErrLockBreach with ErrLockLost). The runner claims once per sweep, and
// many times per lease, so an equal token passes. The claim waits for the
// transactions that hold the row shared (checkJob) to end: an older
// runner's writes in flight are serialised before the newer runner's.
func (s *Store) claimJob(ctx context.Context, job string, fence lock.Fence) error {
	if fence.Backend == "" {
		return fmt.Errorf("claim job %q with fencing token %d: the token names no counter (lock.Fence.Backend)", job, fence.Token)
	}
	var token int64
	err := s.pool.QueryRow(ctx, `
		WITH claim AS (
			INSERT INTO job_fences (job, backend, token) VALUES ($1, $2, $3)
			ON CONFLICT (job, backend) DO UPDATE SET token = EXCLUDED.token WHERE job_fences.token <= EXCLUDED.token
			RETURNING token)
		SELECT token FROM claim
		UNION ALL SELECT token FROM job_fences WHERE job = $1 AND backend = $2 AND NOT EXISTS (SELECT FROM claim)`,
		job, fence.Backend, fence.Token).Scan(&token)
	if err != nil {
		return dbErr("claim job fence", err)
	}
	if token != fence.Token {
		return staleRunner(job, fence, token)
	}
	return nil
}

// checkJob holds job's fence row shared in tx until tx ends, and refuses
// (ErrLockBreach with ErrLockLost) when a runner with a newer token than
// fence has claimed it: tx must not write for a lease that is over.
func checkJob(ctx context.Context, tx pgx.Tx, job string, fence lock.Fence) error {
	var token int64
	err := tx.QueryRow(ctx, `SELECT token FROM job_fences WHERE job = $1 AND backend = $2 FOR SHARE`, job, fence.Backend).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("job %q: no claim with fencing token %d of %q to check: %w", job, fence.Token, fence.Backend, inventory.ErrLockLost)
	}
	if err != nil {
		return dbErr("check job fence", err)
	}
	if token > fence.Token {
		return staleRunner(job, fence, token)
	}
	return nil
}

// staleRunner is the refusal of a runner whose fencing token is older than
// newest, the job's last claim.
func staleRunner(job string, fence lock.Fence, newest int64) error {
	return fmt.Errorf("%w: %w: job %q: fencing token %d is older than %d, the last runner's",
		inventory.ErrLockBreach, inventory.ErrLockLost, job, fence.Token, newest)
}

// HeldOrders returns how many orders are held now, and how long the most
// overdue of them has been past its deadline (0 when none is): the
// expiry job's backlog and lag.
func (s *Store) HeldOrders(ctx context.Context) (held int64, overdue time.Duration, err error) {
	var seconds float64
	err = s.pool.QueryRow(ctx, `
		SELECT count(*), coalesce(extract(epoch FROM now() - min(expires_at) FILTER (WHERE expires_at <= now())), 0)
		FROM orders WHERE state = 'held'`).Scan(&held, &seconds)
	if err != nil {
		return 0, 0, dbErr("count held orders", err)
	}
	return held, time.Duration(seconds * float64(time.Second)), nil
}
