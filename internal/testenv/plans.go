package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statements records every statement a connection sends, alone or in a
// batch, with its arguments: set it as a pool's ConnConfig.Tracer, run the
// code, then ask Plan how Postgres plans what it sent.
type Statements struct {
	mu   sync.Mutex
	sent []pgx.TraceQueryStartData
}

// Sent returns the statements recorded so far, oldest first.
func (s *Statements) Sent() []pgx.TraceQueryStartData {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pgx.TraceQueryStartData(nil), s.sent...)
}

func (s *Statements) add(sql string, args []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, pgx.TraceQueryStartData{SQL: sql, Args: args})
}

// TraceQueryStart records a statement sent alone.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.add(data.SQL, data.Args)
	return ctx
}

// TraceQueryEnd does nothing.
func (*Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing.
func (*Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records a statement sent in a batch.
func (s *Statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	s.add(data.SQL, data.Args)
}

// TraceBatchEnd does nothing.
func (*Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Plan returns Postgres's plan (EXPLAIN) of statement q, planned for its
// arguments as when it was sent, on pool.
func Plan(t testing.TB, pool *pgxpool.Pool, q pgx.TraceQueryStartData) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+q.SQL, q.Args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q.SQL, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q.SQL, err)
	}
	return strings.Join(lines, "\n")
}
