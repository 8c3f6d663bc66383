package load

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/verdict"
)

// Where a run's state was read from, as Result.StateFrom says.
const (
	FromPostgres = "postgres"
	FromAPI      = "api"
)

// truth is where a run reads each product's state before and after the
// buyers: the fleet's Postgres when the load tester has it, else the
// service's own API (which could, if it were wrong, vouch for itself).
type truth interface {
	product(ctx context.Context, id string) (product, error)
	round(ctx context.Context, id string, n int64) (round, error)
	// started is when round n of id began, as the database's clock saw it
	// (zero when unknown).
	started(ctx context.Context, id string, n int64) (time.Time, error)
	// snapshot is product and, when rows, its ledger's rows from round
	// first on, read at one moment; the ledger is nil when it cannot be
	// read (through the API).
	snapshot(ctx context.Context, id string, first int64, rows bool) (product, []verdict.LedgerRow, error)
	// circuits is the circuits the watchdog opened on ids from their first
	// round on (firsts); nil when they cannot be read (through the API).
	circuits(ctx context.Context, ids []string, firsts map[string]int64) ([]verdict.Circuit, error)
	from() string
	close()
}

// apiTruth reads through the service.
type apiTruth struct{ c *Client }

func (a apiTruth) product(ctx context.Context, id string) (product, error) {
	return a.c.product(ctx, id)
}
func (a apiTruth) round(ctx context.Context, id string, n int64) (round, error) {
	return a.c.round(ctx, id, n)
}
func (apiTruth) started(context.Context, string, int64) (time.Time, error) { return time.Time{}, nil }
func (a apiTruth) snapshot(ctx context.Context, id string, _ int64, _ bool) (product, []verdict.LedgerRow, error) {
	p, err := a.c.product(ctx, id)
	return p, nil, err
}
func (apiTruth) circuits(context.Context, []string, map[string]int64) ([]verdict.Circuit, error) {
	return nil, nil
}
func (apiTruth) from() string { return FromAPI }
func (apiTruth) close()       {}

// pgTruth reads the stock row, the rounds table and the ledger straight
// from Postgres, with the same queries' meaning as the service's reads.
type pgTruth struct{ pool *pgxpool.Pool }

func newPGTruth(ctx context.Context, pgURL string, conns int) (*pgTruth, error) {
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("the fleet's Postgres: %w", err)
	}
	cfg.MaxConns = int32(max(1, min(conns, 8)))
	// Planned for each product, not an average one (see cmd/inventory's sidePool).
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("the fleet's Postgres: %w", err)
	}
	return &pgTruth{pool: pool}, nil
}

func (p *pgTruth) product(ctx context.Context, id string) (product, error) {
	return readProduct(ctx, p.pool, id)
}

func (p *pgTruth) round(ctx context.Context, id string, n int64) (round, error) {
	out := round{ProductID: id, Round: n}
	err := p.pool.QueryRow(ctx, `
		SELECT r.initial, r.round = s.round,
		       (SELECT coalesce(sum(quantity), 0) FROM sales WHERE product_id = $1 AND round = $2)
		       - (SELECT coalesce(sum(quantity), 0) FROM returns WHERE product_id = $1 AND round = $2 AND restored),
		       (SELECT count(*) FROM sales WHERE product_id = $1 AND round = $2)
		FROM rounds r JOIN stock s ON s.product_id = r.product_id
		WHERE r.product_id = $1 AND r.round = $2`, id, n).
		Scan(&out.Initial, &out.Current, &out.Sold, &out.Sales)
	if errors.Is(err, pgx.ErrNoRows) {
		return round{}, fmt.Errorf("product %s round %d: not in Postgres", id, n)
	}
	if err != nil {
		return round{}, fmt.Errorf("read round %d of %s from Postgres: %w", n, id, err)
	}
	return out, nil
}

func (p *pgTruth) started(ctx context.Context, id string, n int64) (time.Time, error) {
	var at time.Time
	err := p.pool.QueryRow(ctx, `SELECT started_at FROM rounds WHERE product_id = $1 AND round = $2`, id, n).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("read when round %d of %s began: %w", n, id, err)
	}
	return at, nil
}

func (*pgTruth) from() string { return FromPostgres }
func (p *pgTruth) close()     { p.pool.Close() }

// openTruth is Postgres at pgURL, or the API when pgURL is empty.
func openTruth(ctx context.Context, c *Client, pgURL string, conns int) (truth, error) {
	if pgURL == "" {
		return apiTruth{c}, nil
	}
	return newPGTruth(ctx, pgURL, conns)
}
