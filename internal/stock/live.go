package stock

import "context"

// Products returns the limit most recently changed products, newest first.
func (s *Store) Products(ctx context.Context, limit int) ([]Product, error) {
	rows, err := s.reads.Query(ctx, `
		SELECT product_id, name, quantity, initial, round, version
		FROM stock ORDER BY updated_at DESC, product_id LIMIT $1`, limit)
	if err != nil {
		return nil, dbErr("list products", err)
	}
	defer rows.Close()
	var out []Product
	for rows.Next() {
		var p Product
		if err := rows.Scan(&p.ID, &p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version); err != nil {
			return nil, dbErr("list products", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list products", err)
	}
	return out, nil
}

// maxSalesSince bounds what one SalesSince counts: the newest sales only,
// however old the cursor (a ledger is never pruned).
const maxSalesSince = 10_000

// SalesSince counts, by strategy, the ledger rows after sale id after (by
// the ledger's primary key, so it reads only the new rows), at most the
// newest maxSalesSince of them, and returns the newest sale id; with
// after < 0 it counts nothing and only returns the newest id, a cursor for
// the next call.
func (s *Store) SalesSince(ctx context.Context, after int64) (byStrategy map[string]int64, last int64, err error) {
	if err := s.reads.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM sales`).Scan(&last); err != nil {
		return nil, 0, dbErr("newest sale", err)
	}
	byStrategy = map[string]int64{}
	if after < 0 || after >= last {
		return byStrategy, last, nil
	}
	after = max(after, last-maxSalesSince)
	rows, err := s.reads.Query(ctx, `
		SELECT strategy, count(*) FROM sales WHERE id > $1 AND id <= $2 GROUP BY strategy`, after, last)
	if err != nil {
		return nil, 0, dbErr("count sales", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, 0, dbErr("count sales", err)
		}
		byStrategy[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, dbErr("count sales", err)
	}
	return byStrategy, last, nil
}
