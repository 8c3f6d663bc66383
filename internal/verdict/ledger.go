package verdict

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// LedgerByStrategy says which strategies, from which replicas, wrote the
// product's ledger rows (every round from first), e.g. "redis@inventory-1
// 40, none@inventory-2 2": what a broken run's oversell was sold with.
func LedgerByStrategy(ctx context.Context, pgURL, product string, first int64) (string, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "", fmt.Errorf("read the ledger: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT strategy || '@' || instance, count(*) FROM sales
		WHERE product_id = $1 AND round >= $2 GROUP BY 1 ORDER BY 1`, product, first)
	if err != nil {
		return "", fmt.Errorf("read the ledger: %w", err)
	}
	var parts []string
	for rows.Next() {
		var who string
		var n int64
		if err := rows.Scan(&who, &n); err != nil {
			return "", fmt.Errorf("read the ledger: %w", err)
		}
		parts = append(parts, fmt.Sprintf("%s %d", who, n))
	}
	return strings.Join(parts, ", "), rows.Err()
}

// SoldWithOthers reads the ledger of product (every round from first)
// and names every strategy other than want that sold: buyers who named
// none should all have got the fleet default, want.
func SoldWithOthers(ctx context.Context, pgURL, product string, first int64, want string) ([]string, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT strategy, count(*) FROM sales
		WHERE product_id = $1 AND round >= $2 AND strategy <> $3 GROUP BY 1 ORDER BY 1`, product, first, want)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	var why []string
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("read the ledger: %w", err)
		}
		why = append(why, fmt.Sprintf("%d sales made with %s while the fleet default was %s", n, name, want))
	}
	return why, rows.Err()
}

// KeyedAnswer is the last answer a buyer with an Idempotency-Key got.
type KeyedAnswer struct {
	Key      string
	Definite bool  // 2xx or 409
	OK       bool  // 2xx
	SaleID   int64 // from a 2xx
}

// ReadKeys reads the ledger of product (every round from first) straight
// from Postgres: the ids of its rows by Idempotency-Key ("" for none), for
// CheckKeys.
func ReadKeys(ctx context.Context, pgURL, product string, first int64) (map[string][]int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("check the ledger: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT id, coalesce(idempotency_key, '') FROM sales WHERE product_id = $1 AND round >= $2`, product, first)
	if err != nil {
		return nil, fmt.Errorf("check the ledger: %w", err)
	}
	byKey := map[string][]int64{}
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, fmt.Errorf("check the ledger: %w", err)
		}
		byKey[key] = append(byKey[key], id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check the ledger: %w", err)
	}
	return byKey, nil
}

// CheckKeys holds the ledger's rows by key (ReadKeys) against every
// buyer's last answer: each 2xx has its row, under its Idempotency-Key and
// with the sale id it was told; no key has two rows (a retry sold twice);
// and no row belongs to a buyer who was told 409 sold out or to no buyer
// at all. It returns what is wrong, one line each, at most five.
func CheckKeys(byKey map[string][]int64, answers []KeyedAnswer) []string {
	var why []string
	note := func(format string, args ...any) {
		if len(why) < 5 {
			why = append(why, fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]bool{}
	for _, a := range answers {
		seen[a.Key] = true
		ids := byKey[a.Key]
		switch {
		case len(ids) > 1:
			note("key %s has %d ledger rows %v: a retry sold twice", a.Key, len(ids), ids)
		case a.OK && len(ids) == 0:
			note("key %s got 2xx (sale %d) but has no ledger row", a.Key, a.SaleID)
		case a.OK && a.SaleID != 0 && ids[0] != a.SaleID:
			note("key %s was told sale %d but its ledger row is %d", a.Key, a.SaleID, ids[0])
		case a.Definite && !a.OK && len(ids) > 0:
			note("key %s was told 409 sold out but has ledger row %d", a.Key, ids[0])
		}
	}
	for key, ids := range byKey {
		if !seen[key] {
			note("ledger rows %v under key %q belong to no buyer of this run", ids, key)
		}
	}
	return why
}
