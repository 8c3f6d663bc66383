package stock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"

	"github.com/redis/go-redis/v9"
)

// Helpers for the safety tests (mix, restart, commit-lost): the safe
// strategies, replicas that carry all of them, a tally of what buyers were
// told, and the invariants read back from Postgres.

// safeNames lists the strategies marked safe, in the order of Strategies,
// so that a strategy marked safe later is covered without touching the tests.
func safeNames() []string {
	var names []string
	for _, s := range inventory.Strategies {
		if s.Safe {
			names = append(names, s.Name)
		}
	}
	return names
}

// safeReplica builds every safe strategy as one replica would: all on the
// replica's own Postgres pool and Redis client (redisURL, or the env's Redis
// when empty), with the replica's instance name. d's Store, Redis and
// Instance are filled in; its other fields (Lock, WorkDelay) are kept.
func (e *env) safeReplica(t *testing.T, instance, redisURL string, d testDeps) map[string]inventory.Seller {
	t.Helper()
	d.Store = postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{})
	if redisURL == "" {
		d.Redis = e.newRedis(t)
	} else {
		d.Redis = newRedis(t, redisURL)
	}
	d.Instance = instance
	sellers := map[string]inventory.Seller{}
	for _, name := range safeNames() {
		sellers[name] = e.seller(t, name, d)
	}
	return sellers
}

// outcome names the class of answer a Sell gave, as the API would map it:
// a sale, sold out (409), a lock breach caught by Postgres (409 or 503, it
// comes with ErrSoldOut or ErrLockLost), a 503 (lock wait timed out, lock
// lost, contention, a backend unavailable), an unknown outcome (503
// outcome-unknown), or anything else.
func outcome(err error) string {
	switch {
	case err == nil:
		return "sold"
	case errors.Is(err, inventory.ErrOutcomeUnknown):
		return "outcome-unknown"
	case errors.Is(err, inventory.ErrLockBreach):
		if errors.Is(err, inventory.ErrSoldOut) {
			return "breach+sold-out"
		}
		return "breach+lock-lost"
	case errors.Is(err, inventory.ErrSoldOut):
		return "sold-out"
	case errors.Is(err, inventory.ErrLockTimeout):
		return "503 lock-timeout"
	case errors.Is(err, inventory.ErrLockLost):
		return "503 lock-lost"
	case errors.Is(err, inventory.ErrContention):
		return "503 contention"
	case errors.Is(err, inventory.ErrUnavailable):
		return "503 unavailable"
	}
	return "other"
}

// definite reports whether err is an answer a safe strategy may give a
// buyer when stock runs out or a fault strikes: sold out, a breach, or a
// 503 that says the sale did not happen. An unknown outcome is not
// definite, nor is an error of no known class.
func definite(err error) bool {
	o := outcome(err)
	return o == "sold-out" || strings.HasPrefix(o, "breach") || strings.HasPrefix(o, "503")
}

// tally collects what many concurrent buyers were told.
type tally struct {
	mu sync.Mutex
	// sales are the fresh (not replayed) sales returned with a nil error.
	sales   []inventory.Sale
	replays int
	// kinds counts the answers by outcome class.
	kinds map[string]int
	// strange are the answers that are neither a sale nor definite, with the call.
	strange []string
	// breaches are a few breach errors, for the log.
	breaches []string
}

func newTally() *tally { return &tally{kinds: map[string]int{}} }

// add records Sell's answer to call.
func (tl *tally) add(call string, sale inventory.Sale, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.kinds[outcome(err)]++
	switch {
	case err == nil && sale.Replayed:
		tl.replays++
	case err == nil:
		tl.sales = append(tl.sales, sale)
	case !definite(err):
		tl.strange = append(tl.strange, fmt.Sprintf("%s = %v", call, err))
	case errors.Is(err, inventory.ErrLockBreach) && len(tl.breaches) < 3:
		tl.breaches = append(tl.breaches, fmt.Sprintf("%s = %v", call, err))
	}
}

func (tl *tally) count(kind string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.kinds[kind]
}

// String lists the counts by outcome class, e.g. "sold 300, sold-out 150".
func (tl *tally) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	parts := []string{}
	for _, k := range slices.Sorted(maps.Keys(tl.kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, tl.kinds[k]))
	}
	if tl.replays > 0 {
		parts = append(parts, fmt.Sprintf("(%d of the sales replays)", tl.replays))
	}
	return strings.Join(parts, ", ")
}

// report logs the tally and its breaches, and fails the test for every
// answer that was neither a sale nor definite (at most a few are listed).
func (tl *tally) report(t *testing.T, label string) {
	t.Helper()
	t.Logf("%s: %s", label, tl)
	for _, b := range tl.breaches {
		t.Logf("%s: lock breach caught by Postgres (fine, not an oversell): %s", label, b)
	}
	for i, s := range tl.strange {
		if i == 5 {
			t.Errorf("%s: ... and %d more answers that are neither a sale nor sold-out/breach/503", label, len(tl.strange)-5)
			break
		}
		t.Errorf("%s: %s, want a sale, ErrSoldOut, a breach or a 503-class error", label, s)
	}
}

// ledgerRow is one row of the sales ledger.
type ledgerRow struct {
	round    int
	quantity int64
}

// ledgerRows returns every ledger row of product id, all rounds, by sale id.
func (e *env) ledgerRows(t *testing.T, id string) map[int64]ledgerRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, round, quantity FROM sales WHERE product_id = $1`, id)
	if err != nil {
		t.Fatalf("read the ledger of %q: %v", id, err)
	}
	defer rows.Close()
	out := map[int64]ledgerRow{}
	for rows.Next() {
		var saleID int64
		var r ledgerRow
		if err := rows.Scan(&saleID, &r.round, &r.quantity); err != nil {
			t.Fatalf("read the ledger of %q: %v", id, err)
		}
		out[saleID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the ledger of %q: %v", id, err)
	}
	return out
}

// checkSafety reads product id back from Postgres and fails the test, naming
// label, unless the safety invariants hold: quantity >= 0; in every round
// the ledger's units are at most that round's initial stock; in the current
// round initial - quantity equals the ledger's units; and the fresh sales
// buyers were told of (nil-error, not replayed Sells) are exactly the
// ledger's rows: each with its row, in the round the Sale names, and per
// round as many as the round's ledger rows. It returns the rounds, for logs.
func (e *env) checkSafety(t *testing.T, label, id string, sales []inventory.Sale) []inventory.Round {
	t.Helper()
	ctx := context.Background()
	p := e.product(t, id)
	if p.Quantity < 0 {
		t.Errorf("%s: %q has quantity %d, want >= 0 (oversold by %d)", label, id, p.Quantity, -p.Quantity)
	}
	var rounds []inventory.Round
	for n := 1; n <= p.Round; n++ {
		r, err := e.store.Round(ctx, id, n)
		if err != nil {
			t.Errorf("%s: Round(ctx, %q, %d) = %v, want round %d's figures", label, id, n, err, n)
			continue
		}
		rounds = append(rounds, r)
		if r.Sold > r.Initial {
			t.Errorf("%s: %q round %d sold %d units in %d ledger rows, initial %d: oversold by %d",
				label, id, n, r.Sold, r.Sales, r.Initial, r.Sold-r.Initial)
		}
		if r.Current != (n == p.Round) {
			t.Errorf("%s: Round(ctx, %q, %d).Current = %v, want %v (the product is in round %d)", label, id, n, r.Current, n == p.Round, p.Round)
		}
		if n == p.Round && r.Initial-p.Quantity != r.Sold {
			t.Errorf("%s: %q round %d: initial %d - quantity %d = %d, ledger says %d units (%d rows)",
				label, id, n, r.Initial, p.Quantity, r.Initial-p.Quantity, r.Sold, r.Sales)
		}
	}

	rows := e.ledgerRows(t, id)
	perRound := map[int]int64{}
	for _, s := range sales {
		perRound[s.Round]++
		row, ok := rows[s.ID]
		switch {
		case !ok:
			t.Errorf("%s: Sell told a buyer it sold %d of %q as sale %d in round %d; the ledger has no such row",
				label, s.Quantity, id, s.ID, s.Round)
		case row.round != s.Round || row.quantity != s.Quantity:
			t.Errorf("%s: sale %d was returned as %d units in round %d; the ledger has %d units in round %d",
				label, s.ID, s.Quantity, s.Round, row.quantity, row.round)
		}
	}
	if len(sales) != len(rows) {
		t.Errorf("%s: %d Sell calls on %q returned a fresh sale, the ledger has %d rows: want equal", label, len(sales), id, len(rows))
	}
	for _, r := range rounds {
		if perRound[r.Round] != r.Sales {
			t.Errorf("%s: %d Sell calls returned a sale in round %d of %q, Round(ctx, %q, %d).Sales = %d: want equal",
				label, perRound[r.Round], r.Round, id, id, r.Round, r.Sales)
		}
	}
	for n := range perRound {
		if n < 1 || n > p.Round {
			t.Errorf("%s: %d sales of %q name round %d, which does not exist (the product is in round %d)", label, perRound[n], id, n, p.Round)
		}
	}
	return rounds
}

// formatRounds is rounds for a log line: "round 1: 100 of 100 in 100 rows; …".
func formatRounds(rounds []inventory.Round) string {
	parts := make([]string, len(rounds))
	for i, r := range rounds {
		parts[i] = fmt.Sprintf("round %d: %d of %d sold in %d rows", r.Round, r.Sold, r.Initial, r.Sales)
	}
	return strings.Join(parts, "; ")
}

// until polls cond every 5ms until it holds or limit passes, and reports
// whether it held.
func until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// restockOn restocks product id to q on st, resetting its Redis state in rdb.
func restockOn(t *testing.T, st *postgres.Store, rdb redis.UniversalClient, id string, q int64) {
	t.Helper()
	if _, err := Restock(context.Background(), st, rdb, id, "", q); err != nil {
		t.Fatalf("Restock(%q, %d): %v", id, q, err)
	}
}
