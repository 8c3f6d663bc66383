package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	apiclient "inventory/internal/client"
	"inventory/internal/history"
	"inventory/internal/verdict"
)

// OrderScenario makes a run's buyers hold units for an order instead of
// buying outright, and take their orders through the steps of an order's
// life (docs/orders.md): a fraction never pays (the expiry job returns
// the units), some cancel, some pay right around the deadline (racing the
// sweep), the rest pay, and of those some are refunded or shipped.
type OrderScenario struct {
	// Hold is the fraction of buyers (0–1) that hold instead of buying.
	Hold float64
	// PayWithin is each hold's pay_within (1s–24h).
	PayWithin time.Duration
	// Of the holders: Abandon never pay, Cancel cancel after a random
	// short delay, PayAtDeadline pay right around the deadline (answered
	// 200 or 409 order-expired, both true); the rest pay at once. The three
	// add up to at most 1.
	Abandon, Cancel, PayAtDeadline float64
	// Of the holders who paid at once: Refund are refunded, Ship shipped
	// (of the rest).
	Refund, Ship float64
	// RetrySteps sends every step twice, as a double click or a payment
	// provider's retry does; either way a step whose answer said nothing
	// (none, a 5xx) is sent again, steps being idempotent.
	RetrySteps bool
	// SweepBound is how late after its deadline the expiry job may expire a
	// held order: SweepBound(ttl, interval) of the fleet's settings. The
	// run waits for its held orders to end until PayWithin + SweepBound
	// after its last hold, and an expiry later than its deadline +
	// SweepBound breaks the run.
	SweepBound time.Duration
}

// SweepBound is how late after its deadline a held order is expired by the
// expiry job of a fleet with lock TTL ttl and sweep interval interval:
// two sweeps begin at most interval + ttl + 1 s apart (jobs.MaxGap, a
// runner dying and its lease running out; docs/orders.md), and the sweep
// that takes the order reaches it within SweepSlack.
func SweepBound(ttl, interval time.Duration) time.Duration {
	return interval + ttl + time.Second + SweepSlack
}

// SweepSlack is how long a sweep may take to reach an order due when it
// began: its fence claim, the products before it (four at a time), their
// hot stock rows. A runner-pause at full size once expired an order 3.001 s
// after its deadline against a bound of 3 s without it.
const SweepSlack = time.Second

// ClockMargin is how much earlier than its deadline (by Postgres's clock)
// the history lets an expiry return its order's units. The load tester and
// the local fleet's Postgres read the same machine's clock, and the sweep
// expires only orders whose deadline is at or before its transaction's
// now(); the margin covers rounding and a Postgres on another host of a
// synchronised clock. Wider is safe: it lets the check place the return
// earlier, never forbids a true order.
const ClockMargin = 100 * time.Millisecond

// Validate says what is wrong with s, if anything.
func (s OrderScenario) Validate() error {
	frac := func(name string, f float64) error {
		if !(f >= 0 && f <= 1) {
			return fmt.Errorf("%s must be a fraction from 0 to 1, got %v", name, f)
		}
		return nil
	}
	for _, e := range []error{frac("hold", s.Hold), frac("abandon", s.Abandon), frac("cancel", s.Cancel),
		frac("pay-at-deadline", s.PayAtDeadline), frac("refund", s.Refund), frac("ship", s.Ship)} {
		if e != nil {
			return e
		}
	}
	switch {
	case s.Abandon+s.Cancel+s.PayAtDeadline > 1+1e-9:
		return fmt.Errorf("abandon + cancel + pay-at-deadline must be at most 1, got %v", s.Abandon+s.Cancel+s.PayAtDeadline)
	case s.PayWithin < time.Second || s.PayWithin > 24*time.Hour:
		return fmt.Errorf("pay-within must be from 1s to 24h (the service's bounds), got %s", s.PayWithin)
	case s.SweepBound <= 0:
		return errors.New("the sweep's bound must be positive")
	}
	return nil
}

// fate is what one buyer does.
type fate int

const (
	buyOutright fate = iota
	abandon
	cancelSoon
	payAtDeadline
	payNow
)

// afterPay is what happens to an order paid at once.
type afterPay int

const (
	keep afterPay = iota
	refund
	ship
)

// fateOf is buyer i's fate, drawn from a generator of its own (seeded by
// the run and the buyer), so that every row of a run faces the same
// buyers.
func (s OrderScenario) fateOf(seed uint64, i int64) (fate, afterPay, *rand.Rand) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	if r.Float64() >= s.Hold {
		return buyOutright, keep, r
	}
	f := r.Float64()
	switch {
	case f < s.Abandon:
		return abandon, keep, r
	case f < s.Abandon+s.Cancel:
		return cancelSoon, keep, r
	case f < s.Abandon+s.Cancel+s.PayAtDeadline:
		return payAtDeadline, keep, r
	}
	g := r.Float64()
	switch {
	case g < s.Refund:
		return payNow, refund, r
	case r.Float64() < s.Ship:
		return payNow, ship, r
	}
	return payNow, keep, r
}

// fate is buyer i's fate in a run whose order side is ord (nil: every
// buyer buys outright).
func (ord *orders) fate(seed uint64, i int64) (fate, afterPay, *rand.Rand) {
	if ord == nil {
		return buyOutright, keep, nil
	}
	return ord.s.fateOf(seed, i)
}

// OrdersResult is what a run's orders came to, read from Postgres once
// every held order had ended (or the run stopped waiting).
type OrdersResult struct {
	PayWithin  string `json:"pay_within"`
	SweepBound string `json:"sweep_bound"`
	// Held is the orders the run's holds made; the rest is how many of
	// them ended in each state.
	Held      int64 `json:"held"`
	Paid      int64 `json:"paid"`
	Cancelled int64 `json:"cancelled"`
	Expired   int64 `json:"expired"`
	Refunded  int64 `json:"refunded"`
	Shipped   int64 `json:"shipped"`
	StillHeld int64 `json:"still_held,omitempty"`
	// UnitsReturned is the units of the returns rows (to their stock or
	// not); LateExpiries the orders expired later than the sweep's bound
	// after their deadline, and MaxExpiryLagMs the latest expiry after its
	// deadline.
	UnitsReturned  int64   `json:"units_returned"`
	LateExpiries   int64   `json:"late_expiries"`
	MaxExpiryLagMs float64 `json:"max_expiry_lag_ms"`
	// Steps is the step requests sent (pay, cancel, refund, ship), repeats
	// included; PayExpired the payments answered 409 order-expired.
	Steps      int64 `json:"steps"`
	PayExpired int64 `json:"pay_expired_409"`
	// StepsUnanswered is the step requests whose answer said nothing (none,
	// a 5xx, a 429), each sent again: a step changes no stock, and the
	// units a cancel or refund returned are placed in the history from
	// Postgres's returns, so none of them is an unknown op of the history.
	StepsUnanswered int64 `json:"steps_unanswered,omitempty"`
	// Returns is the orders' returns placed in the history, each inside
	// its window; ReturnOps the ops they make there (the returns one
	// transaction wrote of a product are one op: see mergeReturns).
	Returns   int `json:"history_returns"`
	ReturnOps int `json:"history_return_ops"`
}

// orderLog is what the run knows of one order from its own calls.
type orderLog struct {
	product   int
	round     int64
	holdStart time.Time
	expiresAt time.Time
	// returnSent is when its first cancel or refund was sent, returnOK when
	// the first one answered 200 came back (zero: none).
	returnSent, returnOK time.Time
}

// orders is one run's order side: what its buyers did with their holds
// and what they were told, and the returns seen in Postgres as they
// happened.
type orders struct {
	s   OrderScenario
	c   *Client
	pg  *pgTruth
	ids []string

	mu         sync.Mutex
	logs       map[string]*orderLog
	answers    []verdict.StepAnswer
	steps      int64
	unanswered int64
	payExpired int64
	lastHold   time.Time
	seen       map[string]time.Time // order → when a poll first saw its return committed

	followers sync.WaitGroup
}

func newOrders(s OrderScenario, c *Client, tr truth, ids []string) (*orders, error) {
	pg, ok := tr.(*pgTruth)
	if !ok {
		return nil, fmt.Errorf("%w: an order scenario checks its invariants in the fleet's Postgres: it needs the fleet's Postgres URL", ErrUsage)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return &orders{s: s, c: c, pg: pg, ids: ids, logs: map[string]*orderLog{}, seen: map[string]time.Time{}}, nil
}

// hold sends one hold of one unit of product: POST /sale (or
// /products/{id}/sale) with pay_within, under Idempotency-Key key.
func (c *Client) hold(ctx context.Context, product, strategy, key string, payWithin time.Duration) (apiclient.HeldSale, error) {
	opts := apiclient.SaleOptions{Strategy: strategy, IdempotencyKey: key}
	if c.ByProduct {
		return c.api.HoldProduct(ctx, product, apiclient.ProductSaleRequest{Quantity: 1, PayWithin: payWithin.String()}, opts)
	}
	return c.api.Hold(ctx, apiclient.SaleRequest{ProductID: product, Quantity: 1, PayWithin: payWithin.String()}, opts)
}

// HoldRetries is how many times a hold whose answer said nothing is sent
// again under its key when the run's Config.Retries does not say: as
// often as the fault matrix's buyers retry.
const HoldRetries = 3

// holdRetrying is hold sent again under the same key while its answer may
// change (apiclient.Retryable: none, a 5xx, 503 outcome-unknown
// included), up to retries times, as buyRetrying sends a sale: a hold
// that did happen is answered again (its order as it is now, replayed)
// instead of being made twice. It returns the last answer as the buyer's
// outcome, and how many times it sent it again.
func (c *Client) holdRetrying(ctx context.Context, product, strategy, key string, payWithin time.Duration, retries int) (apiclient.HeldSale, outcome, int) {
	var (
		h     apiclient.HeldSale
		maybe bool
	)
	_, n, err := apiclient.Retry{Max: retries}.Do(ctx, func(ctx context.Context) (apiclient.Sale, error) {
		var err error
		h, err = c.hold(ctx, product, strategy, key, payWithin)
		if err != nil && outcomeOf(apiclient.Sale{}, err).historyOutcome() == history.Unknown {
			maybe = true
		}
		return apiclient.Sale{}, err
	})
	if err != nil {
		o := outcomeOf(apiclient.Sale{}, err)
		o.maybe = maybe
		return h, o, n
	}
	return h, outcome{status: http.StatusCreated, instance: h.Instance, saleID: h.SaleID, round: h.Round, strategy: h.Strategy,
		remaining: h.Remaining, remainingKnown: true, replayed: h.Replayed}, n
}

// held records a hold answered 201 and sets the buyer's fate in motion: a
// follower of its own, so that the worker buys on while the order waits
// for its step.
func (ord *orders) held(ctx context.Context, p int, h apiclient.HeldSale, sent time.Time, f fate, after afterPay, r *rand.Rand) {
	ord.mu.Lock()
	ord.logs[h.OrderID] = &orderLog{product: p, round: h.Round, holdStart: sent, expiresAt: h.ExpiresAt}
	if now := time.Now(); now.After(ord.lastHold) {
		ord.lastHold = now
	}
	ord.mu.Unlock()
	if f == abandon {
		return
	}
	// Each follower's delays are drawn here: r belongs to the worker.
	var wait time.Duration
	switch f {
	case cancelSoon:
		wait = time.Duration(r.Int64N(int64(200 * time.Millisecond)))
	case payNow:
		wait = time.Duration(r.Int64N(int64(100 * time.Millisecond)))
	case payAtDeadline:
		// Right around the deadline, on this machine's clock (Postgres's:
		// the same machine's, see ClockMargin): either side may win.
		wait = time.Until(h.ExpiresAt) + time.Duration(r.Int64N(int64(60*time.Millisecond))) - 30*time.Millisecond
	}
	afterWait := time.Duration(r.Int64N(int64(50 * time.Millisecond)))
	ord.followers.Go(func() {
		if !sleep(ctx, wait) {
			return
		}
		switch f {
		case cancelSoon:
			ord.step(ctx, h.OrderID, "cancel")
		case payAtDeadline:
			ord.step(ctx, h.OrderID, "pay")
		case payNow:
			if ord.step(ctx, h.OrderID, "pay") != http.StatusOK || after == keep || !sleep(ctx, afterWait) {
				return
			}
			if after == refund {
				ord.step(ctx, h.OrderID, "refund")
			} else {
				ord.step(ctx, h.OrderID, "ship")
			}
		}
	})
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stepTries bounds how many times a step whose answer said nothing is sent.
const stepTries = 4

// step takes order id through step (pay, cancel, refund, ship): sent until
// an answer says something (stepTries at most), and, with RetrySteps, once
// more after that, as a double click does. Every telling answer is kept
// for the verdict; a cancel's or refund's window is kept for the history.
// It returns the first telling answer's status (0 if none).
func (ord *orders) step(ctx context.Context, id, step string) int {
	sends := 1
	if ord.s.RetrySteps {
		sends = 2
	}
	first := 0
	for try := 0; try < stepTries && sends > 0; try++ {
		t0 := time.Now()
		o, err := ord.call(ctx, id, step)
		end := time.Now()
		a := verdict.StepAnswer{Order: id, Step: step}
		var p *apiclient.Problem
		switch {
		case err == nil:
			a.Status, a.State = http.StatusOK, o.State
		case errors.As(err, &p) && p.Status == http.StatusConflict:
			a.Status, a.Problem, a.State = p.Status, p.Slug(), p.State
		case errors.As(err, &p) && p.Status/100 == 4 && p.Status != http.StatusTooManyRequests:
			// A step of an order that exists, with no body, has no 4xx
			// but 409 to give: kept for the verdict to hold against
			// Postgres (a 429 is the gateway's "later": sent again).
			a.Status, a.Problem = p.Status, p.Slug()
		}
		ord.mu.Lock()
		ord.steps++
		if a.Status == 0 {
			ord.unanswered++
		}
		if l := ord.logs[id]; l != nil && (step == "cancel" || step == "refund") {
			if l.returnSent.IsZero() {
				l.returnSent = t0
			}
			if a.Status == http.StatusOK && l.returnOK.IsZero() {
				l.returnOK = end
			}
		}
		if a.Status != 0 {
			ord.answers = append(ord.answers, a)
			if a.Problem == "order-expired" {
				ord.payExpired++
			}
		}
		ord.mu.Unlock()
		if a.Status == 0 {
			if ctx.Err() != nil {
				return first
			}
			continue // said nothing: send it again, steps are idempotent
		}
		if first == 0 {
			first = a.Status
		}
		sends--
	}
	return first
}

func (ord *orders) call(ctx context.Context, id, step string) (apiclient.Order, error) {
	switch step {
	case "pay":
		return ord.c.api.Pay(ctx, id)
	case "cancel":
		return ord.c.api.Cancel(ctx, id)
	case "refund":
		return ord.c.api.Refund(ctx, id)
	}
	return ord.c.api.Ship(ctx, id)
}

// returnPoll is how often the run looks for returns committed in Postgres:
// the bound on how late after a return its history window ends.
const returnPoll = 20 * time.Millisecond

// lastLook bounds how long watchReturns tries its last look.
const lastLook = time.Minute

// watchReturns notes, every returnPoll until ctx ends, when each return of
// the run's products (from their rounds firsts on) was first seen
// committed in Postgres; wait blocks until it has stopped, after a last
// look. A look that fails while the run goes on (Postgres restarting or
// failing over under a fault) is skipped: a return it missed is seen by
// a later one, and its window only ends later, which is still true. The
// last look must succeed, tried until lastLook has passed.
func (ord *orders) watchReturns(ctx context.Context, firsts []int64) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(returnPoll)
		defer tick.Stop()
		var lastBy time.Time
		for {
			stopping := ctx.Err() != nil
			if stopping && lastBy.IsZero() {
				lastBy = time.Now().Add(lastLook)
			}
			// Each look is bounded on its own: the last runs after ctx ended.
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := ord.pollReturns(pctx, firsts)
			cancel()
			if stopping && (err == nil || time.Now().After(lastBy)) {
				done <- err
				return
			}
			if stopping {
				time.Sleep(returnPoll) // Postgres still coming back: look again
				continue
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return func() error { return <-done }
}

func (ord *orders) pollReturns(ctx context.Context, firsts []int64) error {
	rows, err := ord.pg.pool.Query(ctx, `
		SELECT r.order_id::text FROM returns r
		JOIN unnest($1::text[], $2::bigint[]) AS f (product_id, round) ON r.product_id = f.product_id AND r.round >= f.round`,
		ord.ids, firsts)
	if err != nil {
		return fmt.Errorf("look for returns in Postgres: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("look for returns in Postgres: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("look for returns in Postgres: %w", err)
	}
	now := time.Now() // after the query's snapshot: each return had committed by then
	ord.mu.Lock()
	for _, id := range ids {
		if _, ok := ord.seen[id]; !ok {
			ord.seen[id] = now
		}
	}
	ord.mu.Unlock()
	return nil
}

// awaitEnded waits until no order of the run's products (from their rounds
// firsts on) is held, or until PayWithin + SweepBound after the last hold;
// it returns the orders still held then.
func (ord *orders) awaitEnded(ctx context.Context, firsts []int64) ([]string, error) {
	ord.mu.Lock()
	deadline := ord.lastHold.Add(ord.s.PayWithin + ord.s.SweepBound)
	ord.mu.Unlock()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		held, err := ord.stillHeld(ctx, firsts)
		if err != nil || len(held) == 0 || time.Now().After(deadline) {
			return held, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (ord *orders) stillHeld(ctx context.Context, firsts []int64) ([]string, error) {
	rows, err := ord.pg.pool.Query(ctx, `
		SELECT o.id::text FROM orders o
		JOIN unnest($1::text[], $2::bigint[]) AS f (product_id, round) ON o.product_id = f.product_id AND o.round >= f.round
		WHERE o.state = 'held' ORDER BY o.expires_at`, ord.ids, firsts)
	if err != nil {
		return nil, fmt.Errorf("read the held orders: %w", err)
	}
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, id)
	}
	rows.Close()
	return out, rows.Err()
}

// evidence reads the run's orders and rounds back from Postgres (every
// product from its round firsts[i] on) for the verdict.
func (ord *orders) evidence(ctx context.Context, firsts []int64, unended []string) (*verdict.Orders, error) {
	ev := &verdict.Orders{PayWithin: ord.s.PayWithin, SweepBound: ord.s.SweepBound, Unended: unended}
	for i, id := range ord.ids {
		rounds, err := readOrderRounds(ctx, ord.pg, id, firsts[i])
		if err != nil {
			return nil, err
		}
		ev.Rounds = append(ev.Rounds, rounds...)
		list, err := readOrders(ctx, ord.pg, id, firsts[i])
		if err != nil {
			return nil, err
		}
		ev.Orders = append(ev.Orders, list...)
	}
	ord.mu.Lock()
	ev.Steps = append([]verdict.StepAnswer(nil), ord.answers...)
	ord.mu.Unlock()
	return ev, nil
}

// readOrderRounds is every round of product id from first on, its units
// counted by where they are.
func readOrderRounds(ctx context.Context, pg *pgTruth, id string, first int64) ([]verdict.OrderRound, error) {
	rows, err := pg.pool.Query(ctx, `
		SELECT r.round, r.round = s.round, r.initial, s.quantity,
		       (SELECT coalesce(sum(l.quantity), 0) FROM sales l
		         WHERE l.product_id = $1 AND l.round = r.round AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.sale_id = l.id)),
		       (SELECT coalesce(sum(quantity) FILTER (WHERE state = 'held'), 0) FROM orders WHERE product_id = $1 AND round = r.round),
		       (SELECT coalesce(sum(quantity) FILTER (WHERE state = 'paid'), 0) FROM orders WHERE product_id = $1 AND round = r.round),
		       (SELECT coalesce(sum(quantity) FILTER (WHERE state = 'shipped'), 0) FROM orders WHERE product_id = $1 AND round = r.round),
		       (SELECT coalesce(sum(quantity) FILTER (WHERE state IN ('cancelled', 'expired', 'refunded')), 0) FROM orders
		         WHERE product_id = $1 AND round = r.round),
		       (SELECT coalesce(sum(quantity), 0) FROM returns WHERE product_id = $1 AND round = r.round AND restored)
		FROM rounds r JOIN stock s ON s.product_id = r.product_id
		WHERE r.product_id = $1 AND r.round >= $2 ORDER BY r.round`, id, first)
	if err != nil {
		return nil, fmt.Errorf("read the order rounds of %s: %w", id, err)
	}
	defer rows.Close()
	var out []verdict.OrderRound
	for rows.Next() {
		r := verdict.OrderRound{Product: id}
		if err := rows.Scan(&r.Round, &r.Current, &r.Initial, &r.Stock, &r.Outright, &r.Held, &r.Paid, &r.Shipped, &r.Freed, &r.Returned); err != nil {
			return nil, fmt.Errorf("read the order rounds of %s: %w", id, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// readOrders is every order of product id from round first on, with its
// history of states and its returns.
func readOrders(ctx context.Context, pg *pgTruth, id string, first int64) ([]verdict.Order, error) {
	rows, err := pg.pool.Query(ctx, `
		SELECT o.id::text, o.round, o.quantity, o.state, o.expires_at,
		       (SELECT count(*) FROM returns r WHERE r.order_id = o.id),
		       coalesce((SELECT min(r.reason) FROM returns r WHERE r.order_id = o.id), ''),
		       coalesce((SELECT min(r.xmin::text) FROM returns r WHERE r.order_id = o.id), ''),
		       coalesce((SELECT array_agg(e.state ORDER BY e.at, e.state = 'held' DESC) FROM order_events e WHERE e.order_id = o.id), '{}'),
		       coalesce((SELECT array_agg(e.at ORDER BY e.at, e.state = 'held' DESC) FROM order_events e WHERE e.order_id = o.id), '{}')
		FROM orders o WHERE o.product_id = $1 AND o.round >= $2 ORDER BY o.created_at`, id, first)
	if err != nil {
		return nil, fmt.Errorf("read the orders of %s: %w", id, err)
	}
	defer rows.Close()
	var out []verdict.Order
	for rows.Next() {
		o := verdict.Order{Product: id}
		var states []string
		var at []time.Time
		if err := rows.Scan(&o.ID, &o.Round, &o.Quantity, &o.State, &o.ExpiresAt, &o.Returns, &o.ReturnReason, &o.ReturnTx, &states, &at); err != nil {
			return nil, fmt.Errorf("read the orders of %s: %w", id, err)
		}
		for k := range min(len(states), len(at)) {
			o.Events = append(o.Events, verdict.OrderEvent{State: states[k], At: at[k]})
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// returnOps is every return of ev's orders as an op of the history, each
// inside the window it certainly happened in: a cancel's or refund's from
// its first send to its first 200 (or, without one, to when a poll of
// Postgres saw it); an expiry's from its deadline (less ClockMargin, and
// not before its hold was sent) to when a poll saw it; neither before the
// time order_events gives its state, less ClockMargin (the return commits
// in the transaction that wrote it). The returns one transaction wrote of
// one product and round (a sweep's expiries) are one op of all their
// units, inside every one of their windows (see mergeReturns).
// clientBase numbers the ops, one client each. It also returns how many
// orders' returns the ops hold.
func (ord *orders) returnOps(ev *verdict.Orders, clientBase int, runEnd time.Time) ([]history.Op, int, error) {
	ord.mu.Lock()
	defer ord.mu.Unlock()
	var out []returnOp
	for _, o := range ev.Orders {
		if o.Returns == 0 {
			continue
		}
		l := ord.logs[o.ID] // nil: a hold whose answer never came
		end, ok := ord.seen[o.ID]
		if !ok {
			end = runEnd // committed after the last poll began: before the run's end
		}
		var start time.Time
		switch o.ReturnReason {
		case verdict.StateExpired:
			start = o.ExpiresAt.Add(-ClockMargin)
			if l != nil && l.holdStart.After(start) {
				start = l.holdStart
			}
		default:
			if l == nil || l.returnSent.IsZero() {
				return nil, 0, fmt.Errorf("order %s was %s, but no buyer of the run asked for it", o.ID, o.ReturnReason)
			}
			start = l.returnSent
			if !l.returnOK.IsZero() && l.returnOK.Before(end) {
				end = l.returnOK
			}
		}
		// The return commits in the transaction that wrote the event of
		// its state, after the event's time (clock_timestamp()): not before.
		for _, e := range o.Events {
			if at := e.At.Add(-ClockMargin); e.State == o.ReturnReason && at.After(start) {
				start = at
			}
		}
		out = append(out, returnOp{tx: o.ReturnTx, op: history.Op{Product: o.Product, Kind: history.Return, Quantity: o.Quantity,
			Outcome: history.Sold, Remaining: -1, Round: int(o.Round), Start: start, End: end}})
	}
	ops := mergeReturns(out)
	for i := range ops {
		ops[i].Client = clientBase + i
	}
	return ops, len(out), nil
}

// returnOp is one order's return as an op of the history, and the
// transaction that wrote it ("" when not known).
type returnOp struct {
	tx string
	op history.Op
}

// mergeReturns makes the returns one transaction wrote of one product and
// round one op of all their units: they became visible at its commit, at
// one moment, which came after each of their starts and before each of
// their ends; so the op's window is the latest start to the earliest end
// (its start, should the end come first: the clocks differ by up to
// ClockMargin). Returns of other transactions, or of none known, stay
// one op each. A sweep expires a product's due orders in one
// transaction: as separate ops, a batch of k with the same window can be
// placed in 2^k ways. Porcupine alone then ran out of its budget on runs
// whose buyers waited out a paused replica (93 s to find the order of a
// 300-op history that, merged, checks in 5 ms); the history's own search
// finds an order of a true history either way, but a false one must be
// ruled out in every order, which merged takes milliseconds and apart
// more than any budget (TestASweepsReturnsCheckAsOne).
func mergeReturns(rs []returnOp) []history.Op {
	type group struct {
		tx, product string
		round       int
	}
	at := map[group]int{}
	var out []history.Op
	for _, r := range rs {
		g := group{r.tx, r.op.Product, r.op.Round}
		i, ok := at[g]
		if r.tx == "" || !ok {
			if r.tx != "" {
				at[g] = len(out)
			}
			out = append(out, r.op)
			continue
		}
		m := &out[i]
		m.Quantity += r.op.Quantity
		if r.op.Start.After(m.Start) {
			m.Start = r.op.Start
		}
		if r.op.End.Before(m.End) {
			m.End = r.op.End
		}
	}
	for i := range out {
		if out[i].End.Before(out[i].Start) {
			out[i].End = out[i].Start
		}
	}
	return out
}

// result sums ev up for the report.
func (ord *orders) result(ev *verdict.Orders) *OrdersResult {
	r := &OrdersResult{PayWithin: ord.s.PayWithin.String(), SweepBound: ord.s.SweepBound.String()}
	var maxLag time.Duration
	for _, o := range ev.Orders {
		r.Held++
		switch o.State {
		case verdict.StatePaid:
			r.Paid++
		case verdict.StateCancelled:
			r.Cancelled++
		case verdict.StateExpired:
			r.Expired++
		case verdict.StateRefunded:
			r.Refunded++
		case verdict.StateShipped:
			r.Shipped++
		case verdict.StateHeld:
			r.StillHeld++
		}
		if o.Returns > 0 {
			r.UnitsReturned += o.Quantity
		}
		lag := o.LateExpiry()
		maxLag = max(maxLag, lag)
		if lag > ord.s.SweepBound {
			r.LateExpiries++
		}
	}
	r.MaxExpiryLagMs = float64(maxLag.Microseconds()) / 1000
	ord.mu.Lock()
	r.Steps, r.PayExpired, r.StepsUnanswered = ord.steps, ord.payExpired, ord.unanswered
	ord.mu.Unlock()
	return r
}
