package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	apiclient "inventory/internal/client"
	"inventory/internal/history"
)

// ErrUsage marks an error in what the caller asked for, such as a strategy
// the fleet does not offer: the load tester exits 2 for it.
var ErrUsage = errors.New("usage")

// Client is what a load needs of a fleet's HTTP API, through
// internal/client as any outside caller would: sales as buyers send them
// (an answer becomes an outcome, retried with its Idempotency-Key where
// asked), restocks, rounds, and the fleet default.
type Client struct {
	api *apiclient.Client
	// ByProduct sends sales as POST /products/{id}/sale, which nginx routes
	// to one replica per product, instead of POST /sale.
	ByProduct bool
}

// NewClient is a Client of the fleet at base, with its admin token, for
// concurrency buyers at once. Its requests come from the local addresses
// sources in turn (apiclient.LoopbackSources), so that a gateway limiting
// each client address sees as many clients, each with its share; nil: from
// the one address the system picks.
func NewClient(base, adminToken string, concurrency int, sources []netip.Addr) *Client {
	return &Client{api: apiclient.New(base, apiclient.Options{AdminToken: adminToken, Concurrency: concurrency, LocalAddrs: sources})}
}

// ClientSources is the n loopback source addresses NewClient spreads its
// connections over (apiclient.LoopbackSources), nil for n = 0. They reach
// only a fleet on this machine: a target (the fleet's URL; "" for the load
// tester's own local fleet) on another host is an error.
func ClientSources(n int, target string) ([]netip.Addr, error) {
	if n == 0 {
		return nil, nil
	}
	if target != "" {
		u, err := url.Parse(target)
		if err != nil {
			return nil, err
		}
		a, err := netip.ParseAddr(u.Hostname())
		if u.Hostname() != "localhost" && (err != nil || !a.IsLoopback()) {
			return nil, fmt.Errorf("loopback source addresses reach only a fleet on this machine, not %s", target)
		}
	}
	return apiclient.LoopbackSources(n)
}

// Close drops the idle connections.
func (c *Client) Close() { c.api.CloseIdleConnections() }

// StrategyInfo is one entry of GET /strategies.
type StrategyInfo = apiclient.StrategyInfo

// product is GET /products/{id}.
type product = apiclient.Product

// round is GET /products/{id}/rounds/{round}: one round of the ledger, current or past.
type round = apiclient.Round

func (c *Client) strategies(ctx context.Context) ([]StrategyInfo, error) {
	out, err := idempotent(ctx, c.api.Strategies)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GET %s/strategies: empty list", c.api.BaseURL())
	}
	return out, nil
}

func (c *Client) product(ctx context.Context, id string) (product, error) {
	return idempotent(ctx, func(ctx context.Context) (product, error) { return c.api.Product(ctx, id) })
}

func (c *Client) round(ctx context.Context, id string, n int64) (round, error) {
	return idempotent(ctx, func(ctx context.Context) (round, error) { return c.api.Round(ctx, id, n) })
}

// restock sets the product's stock, starting a new round of the ledger, and
// returns the product as restocked. Every try carries the same
// Idempotency-Key, so a try whose answer was lost (a replica killed after
// its commit: nginx answers 502 and never resends a PUT) is sent again as
// adminRetry says and starts no second round.
func (c *Client) restock(ctx context.Context, id string, quantity int64) (product, error) {
	req := apiclient.RestockRequest{Quantity: quantity, Name: "load test " + id, IdempotencyKey: uuid.NewString()}
	p, err := idempotent(ctx, func(ctx context.Context) (product, error) { return c.api.Restock(ctx, id, req) })
	if err != nil {
		return p, fmt.Errorf("restock %s: %w", id, adminHint(err))
	}
	return p, nil
}

// DefaultStrategy is GET /strategy: the fleet default that a sale naming no strategy uses.
func (c *Client) DefaultStrategy(ctx context.Context) (string, error) {
	return idempotent(ctx, c.api.Strategy)
}

// SetDefaultStrategy is PUT /strategy: it switches the fleet default. The
// switch is idempotent, so an answer that did not settle it (a 503 while
// the fleet's database is slow to answer, no answer) is sent again, a few
// times, as a sale with an Idempotency-Key would be.
func (c *Client) SetDefaultStrategy(ctx context.Context, name string) error {
	_, err := idempotent(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.api.SetStrategy(ctx, name)
	})
	if err != nil {
		return fmt.Errorf("switch the fleet default to %s: %w", name, adminHint(err))
	}
	return nil
}

// adminRetry is how an idempotent admin call is sent again.
var adminRetry = apiclient.Retry{Max: 4, Backoff: 200 * time.Millisecond}

// idempotent is call sent again as adminRetry says while its answer is
// retryable (a 503 while the fleet's database is slow to answer, no
// answer): the reads the load tester judges by change nothing.
func idempotent[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	var out T
	_, _, err := adminRetry.Do(ctx, func(ctx context.Context) (apiclient.Sale, error) {
		var err error
		out, err = call(ctx)
		return apiclient.Sale{}, err
	})
	return out, err
}

// adminHint points an admin call refused for its token at the flag.
func adminHint(err error) error {
	var p *apiclient.Problem
	if errors.As(err, &p) && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden) {
		return fmt.Errorf("%w (pass the fleet's INVENTORY_ADMIN_TOKEN with --admin-token)", err)
	}
	return err
}

// awaitDefault polls GET /strategy until it answers name times in a row,
// so that every replica behind the load balancer has dropped its cached
// copy of the old default, and gives up after wait.
func (c *Client) awaitDefault(ctx context.Context, name string, times int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	inARow, last := 0, ""
	for inARow < times {
		got, err := c.DefaultStrategy(ctx)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("the fleet default is still %q %s after switching it to %s", last, wait, name)
		case err != nil && !apiclient.Retryable(err):
			return err
		case err == nil && got == name:
			inARow++
			continue
		}
		inARow = 0 // a different default, or an answer that said nothing (asked again)
		if err == nil {
			last = got
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return nil
}

// healthz asks GET /healthz.
func (c *Client) healthz(ctx context.Context) error {
	_, err := c.api.Healthz(ctx)
	return err
}

// outcome is what one buyer saw.
type outcome struct {
	status   int    // HTTP status, 0 when no answer came back
	instance string // X-Instance of the replica that answered
	err      error  // transport error, or the problem of an unexpected status

	// From a 2xx: the sale's id, the round whose stock it decremented (0
	// when the answer did not say) and the strategy that sold.
	saleID   int64
	round    int64
	strategy string
	// Also from a 2xx: the units it said remained (when remainingKnown:
	// the answer parsed), and whether it replayed an earlier sale of the
	// same Idempotency-Key (its remaining is then today's, not the sale's).
	remaining      int64
	remainingKnown bool
	replayed       bool
	// From a 409 or 503 problem: the lock broke and the database refused
	// the write (lock_breach), the service could not tell whether the
	// sale committed (type outcome-unknown), or the product's circuit was
	// open (type circuit-open).
	breach, unknown, circuitOpen bool
	// maybe says an earlier attempt of a retried sale had an answer that
	// may have sold (see historyOutcome).
	maybe bool
}

// definite reports whether the answer says for certain whether the buyer
// bought: sold (2xx) or sold out (409).
func (o outcome) definite() bool { return o.status/100 == 2 || o.status == http.StatusConflict }

// buy sends one sale of one unit of product: POST /sale, or POST
// /products/{id}/sale when c.ByProduct. A named strategy is an admin call
// and carries the admin token; an empty one sells with the fleet default,
// as a buyer does. A non-empty key is sent as the Idempotency-Key.
func (c *Client) buy(ctx context.Context, product, strategy, key string) outcome {
	return outcomeOf(c.sell(ctx, product, strategy, key))
}

// buyRetrying is buy, sending the sale again with the same key while its
// answer may change (apiclient.Retryable), up to retries times, as a
// well-behaved buyer does (apiclient.Retry); it also returns how many
// times it sent it again. Without a key it sends once: a retry could buy
// twice.
func (c *Client) buyRetrying(ctx context.Context, product, strategy, key string, retries int) (outcome, int) {
	if key == "" || retries <= 0 {
		return c.buy(ctx, product, strategy, key), 0
	}
	maybe := false
	sale, n, err := apiclient.Retry{Max: retries}.Do(ctx, func(ctx context.Context) (apiclient.Sale, error) {
		sale, err := c.sell(ctx, product, strategy, key)
		if err != nil && outcomeOf(sale, err).historyOutcome() == history.Unknown {
			maybe = true
		}
		return sale, err
	})
	o := outcomeOf(sale, err)
	o.maybe = maybe
	return o, n
}

func (c *Client) sell(ctx context.Context, product, strategy, key string) (apiclient.Sale, error) {
	opts := apiclient.SaleOptions{Strategy: strategy, IdempotencyKey: key}
	if c.ByProduct {
		return c.api.SellProduct(ctx, product, apiclient.ProductSaleRequest{Quantity: 1}, opts)
	}
	return c.api.Sell(ctx, apiclient.SaleRequest{ProductID: product, Quantity: 1}, opts)
}

// outcomeOf is what a buyer whose sale was answered sale, err saw.
func outcomeOf(sale apiclient.Sale, err error) outcome {
	var p *apiclient.Problem
	switch {
	case err == nil:
		return outcome{status: http.StatusOK, instance: sale.Instance, saleID: sale.SaleID, round: sale.Round, strategy: sale.Strategy,
			remaining: sale.Remaining, remainingKnown: true, replayed: sale.Replayed}
	case errors.Is(err, apiclient.ErrMalformedAnswer):
		// An answer that does not parse still sold: the ledger has the last word.
		return outcome{status: http.StatusOK, instance: sale.Instance, saleID: sale.SaleID, round: sale.Round, strategy: sale.Strategy}
	case errors.As(err, &p):
		o := outcome{status: p.Status, instance: p.Instance}
		switch p.Status {
		case http.StatusConflict, http.StatusServiceUnavailable:
			o.breach = p.LockBreach
			o.unknown = p.Status == http.StatusServiceUnavailable && p.Slug() == "outcome-unknown"
			o.circuitOpen = p.Status == http.StatusServiceUnavailable && p.Slug() == "circuit-open"
		default:
			o.err = err
		}
		return o
	default:
		return outcome{err: err}
	}
}

// PickStrategies asks the fleet which strategies exist and keeps the ones named in list (all when empty).
func PickStrategies(ctx context.Context, c *Client, list string, log io.Writer) ([]StrategyInfo, error) {
	all, err := c.strategies(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask the fleet for its strategies: %w", err)
	}
	if strings.TrimSpace(list) == "" {
		var picked []StrategyInfo
		for _, s := range all {
			if !s.Available {
				fmt.Fprintf(log, "skipping %s: not available on this fleet (it needs %s)\n", s.Name, s.Needs)
				continue
			}
			picked = append(picked, s)
		}
		return picked, nil
	}
	var picked []StrategyInfo
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(s StrategyInfo) bool { return s.Name == name })
		if i < 0 {
			var names []string
			for _, s := range all {
				names = append(names, s.Name)
			}
			return nil, fmt.Errorf("%w: unknown strategy %q (the fleet offers %s)", ErrUsage, name, strings.Join(names, ", "))
		}
		if !all[i].Available {
			return nil, fmt.Errorf("%w: strategy %q is not available on this fleet: it needs %s", ErrUsage, name, all[i].Needs)
		}
		picked = append(picked, all[i])
	}
	return picked, nil
}
