package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

func fences(holds []Hold) []int64 {
	fs := make([]int64, len(holds))
	for i, h := range holds {
		fs[i] = h.Fence
	}
	return fs
}

func TestHoldLogRingKeepsTheNewest(t *testing.T) {
	l := NewHoldLog(3)
	var open []OpenHold
	for fence := int64(1); fence <= 5; fence++ {
		open = append(open, l.Begin("sku-1", inventory.RedisLock, fence))
	}
	// Ending holds already pushed out must not touch the slots that
	// reuse their places.
	for _, h := range open {
		h.End(HoldSold)
	}
	got := l.For("sku-1")
	if want := []int64{3, 4, 5}; !slices.Equal(fences(got), want) {
		t.Fatalf("For(sku-1) after 5 holds in a ring of 3: fences %v, want %v", fences(got), want)
	}
	for _, h := range got {
		if h.Outcome != HoldSold || h.End.Before(h.Start) || h.Strategy != inventory.RedisLock {
			t.Errorf("hold %+v, want a %s hold ended %q after its start", h, inventory.RedisLock, HoldSold)
		}
	}
	// The ring keeps wrapping in order.
	l.Begin("sku-1", inventory.RedisLock, 6).End(HoldSoldOut)
	if got, want := fences(l.For("sku-1")), []int64{4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("For(sku-1) after a 6th hold: fences %v, want %v", got, want)
	}
}

func TestHoldLogForFiltersByProductAndKeepsOpenHolds(t *testing.T) {
	l := NewHoldLog(10)
	a1 := l.Begin("sku-a", inventory.Fair, 1)
	l.Begin("sku-b", inventory.PgLock, 7).End(HoldSoldOut)
	a1.End(HoldLockLost)
	// A second End changes nothing.
	a1.End(HoldSold)
	// Still held.
	l.Begin("sku-a", inventory.Fair, 2)

	a := l.For("sku-a")
	if len(a) != 2 {
		t.Fatalf("For(sku-a) = %+v, want 2 holds", a)
	}
	if a[0].Fence != 1 || a[0].Outcome != HoldLockLost || a[0].End.IsZero() {
		t.Errorf("For(sku-a)[0] = %+v, want fence 1 ended %q", a[0], HoldLockLost)
	}
	if a[1].Fence != 2 || a[1].Outcome != "" || !a[1].End.IsZero() || a[1].Start.IsZero() {
		t.Errorf("For(sku-a)[1] = %+v, want fence 2 open (started, no end, no outcome)", a[1])
	}
	if b := l.For("sku-b"); len(b) != 1 || b[0].Strategy != inventory.PgLock || b[0].Fence != 7 || b[0].Outcome != HoldSoldOut {
		t.Errorf("For(sku-b) = %+v, want the one pglock hold, fence 7, %q", b, HoldSoldOut)
	}
	if c := l.For("sku-c"); len(c) != 0 {
		t.Errorf("For(sku-c) = %+v, want none", c)
	}
}

func TestNilHoldLogRecordsNothing(t *testing.T) {
	var l *HoldLog
	h := l.Begin("sku-1", inventory.RedisLock, 1)
	h.End(HoldSold)
	if got := l.For("sku-1"); got != nil {
		t.Errorf("nil HoldLog: For = %+v, want nil", got)
	}
	sale, err := h.done(inventory.Sale{ID: 1}, nil)
	if err != nil || sale.ID != 1 {
		t.Errorf("nil HoldLog: done(sale 1, nil) = %+v, %v; want the sale passed on", sale, err)
	}
}

func TestHoldLogDoesNotAllocateOnceFull(t *testing.T) {
	l := NewHoldLog(4)
	for range 4 {
		l.Begin("sku-1", inventory.RedisLock, 1).End(HoldSold)
	}
	if n := testing.AllocsPerRun(1000, func() { l.Begin("sku-1", inventory.RedisLock, 1).End(HoldSold) }); n != 0 {
		t.Errorf("Begin+End on a full ring: %v allocations, want 0", n)
	}
}

// TestHoldLogConcurrentUse runs writers and readers at once behind a start
// gate (meant for -race) and checks that no hold was lost or mixed up.
func TestHoldLogConcurrentUse(t *testing.T) {
	const writers, each = 8, 500
	l := NewHoldLog(writers * each)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			product := fmt.Sprintf("sku-%d", w%2)
			for i := range each {
				h := l.Begin(product, inventory.Reentrant, int64(w*each+i+1))
				h.End(HoldSold)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			<-start
			for range 50 {
				for _, h := range l.For("sku-0") {
					if h.Strategy != inventory.Reentrant {
						t.Errorf("For(sku-0) while writing: %+v, want a %s hold", h, inventory.Reentrant)
						return
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[int64]bool{}
	for _, product := range []string{"sku-0", "sku-1"} {
		holds := l.For(product)
		if len(holds) != writers/2*each {
			t.Errorf("For(%s) = %d holds, want %d", product, len(holds), writers/2*each)
		}
		for i, h := range holds {
			if h.Outcome != HoldSold || h.End.IsZero() {
				t.Errorf("For(%s): hold %+v not ended %q", product, h, HoldSold)
			}
			if i > 0 && h.Start.Before(holds[i-1].Start) {
				t.Errorf("For(%s): hold %d starts before hold %d: not oldest first", product, i, i-1)
			}
			seen[h.Fence] = true
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct holds recorded, want %d", len(seen), writers*each)
	}
}

func TestHoldOutcomes(t *testing.T) {
	for _, c := range []struct {
		sale inventory.Sale
		err  error
		want string
	}{
		{inventory.Sale{ID: 1}, nil, HoldSold},
		{inventory.Sale{ID: 1, Replayed: true}, nil, HoldReplayed},
		{inventory.Sale{}, fmt.Errorf("3 left: %w", inventory.ErrSoldOut), HoldSoldOut},
		{inventory.Sale{}, fmt.Errorf("%w: lease gone", inventory.ErrLockLost), HoldLockLost},
		{inventory.Sale{}, fmt.Errorf("%w: guard: %w", inventory.ErrLockBreach, inventory.ErrSoldOut), HoldLockLost},
		{inventory.Sale{}, fmt.Errorf("%w: %w", inventory.ErrUnavailable, inventory.ErrOutcomeUnknown), HoldUnknown},
		{inventory.Sale{}, fmt.Errorf("postgres: %w", inventory.ErrUnavailable), HoldError},
		{inventory.Sale{}, errors.New("boom"), HoldError},
	} {
		if got := saleOutcome(c.sale, c.err); got != c.want {
			t.Errorf("saleOutcome(%+v, %v) = %q, want %q", c.sale, c.err, got, c.want)
		}
	}
	lostErr := fmt.Errorf("%w: x", inventory.ErrLockLost)
	for _, c := range []struct {
		answers []postgres.BatchAnswer
		want    string
	}{
		{[]postgres.BatchAnswer{{Sale: inventory.Sale{ID: 1}}, {Err: inventory.ErrSoldOut}}, HoldSold},
		{[]postgres.BatchAnswer{{Err: inventory.ErrSoldOut}, {Replay: true}}, HoldSoldOut},
		{[]postgres.BatchAnswer{{Replay: true}}, HoldReplayed},
		{[]postgres.BatchAnswer{{Err: lostErr}, {Err: lostErr}}, HoldLockLost},
		{nil, HoldError},
	} {
		if got := batchOutcome(c.answers); got != c.want {
			t.Errorf("batchOutcome(%+v) = %q, want %q", c.answers, got, c.want)
		}
	}
}

// holdingReplica builds strategy name as one replica would (replicaWith),
// recording its holds in a log of its own.
func (e *env) holdingReplica(t *testing.T, name, instance string, workDelay time.Duration) (inventory.Seller, *HoldLog) {
	t.Helper()
	holds := NewHoldLog(100)
	return e.seller(t, name, testDeps{Deps: Deps{
		Store:     postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}),
		Redis:     e.newRedis(t),
		Instance:  instance,
		WorkDelay: workDelay,
		Holds:     holds,
	}, Lock: testLock}), holds
}

// TestLockHoldsDoNotOverlap has two replicas of each safe lock strategy
// sell one product at once, more orders than units, and checks the holds
// they recorded: every one ended, none overlapping another (in either
// replica), fences rising with the start, and one "sold" hold per unit,
// the rest "sold-out" (handoff: one hold per batch, so only that each ended
// sold or sold-out).
func TestLockHoldsDoNotOverlap(t *testing.T) {
	const units, ordersPerReplica = 3, 4
	for _, name := range []string{inventory.RedisLock, inventory.Reentrant, inventory.Fair, inventory.Redlock, inventory.Etcd, inventory.ZooKeeper, inventory.PgLock, inventory.Handoff} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			id := "holds-" + name
			e.restock(t, id, units)
			a, holdsA := e.holdingReplica(t, name, "replica-a", 5*time.Millisecond)
			b, holdsB := e.holdingReplica(t, name, "replica-b", 5*time.Millisecond)

			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, s := range []inventory.Seller{a, b} {
				for range ordersPerReplica {
					wg.Go(func() {
						<-start
						_, err := s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1})
						if err != nil && !errors.Is(err, inventory.ErrSoldOut) {
							t.Errorf("%s: Sell(%q, 1) = %v, want a sale or ErrSoldOut", name, id, err)
						}
					})
				}
			}
			close(start)
			wg.Wait()
			if p := e.checkLedger(t, id); p.Sold != units {
				t.Fatalf("%s: %d units sold, want all %d", name, p.Sold, units)
			}

			holds := append(holdsA.For(id), holdsB.For(id)...)
			slices.SortFunc(holds, func(x, y Hold) int { return x.Start.Compare(y.Start) })
			outcomes := map[string]int{}
			for i, h := range holds {
				outcomes[h.Outcome]++
				if h.Strategy != name || h.End.IsZero() || h.Fence <= 0 {
					t.Errorf("%s: hold %+v, want a %s hold, ended, with a fence", name, h, name)
				}
				if i == 0 {
					continue
				}
				prev := holds[i-1]
				if h.Start.Before(prev.End) {
					t.Errorf("%s: hold with fence %d started at %s, before the one with fence %d ended at %s: overlapping holders",
						name, h.Fence, h.Start.Format(time.RFC3339Nano), prev.Fence, prev.End.Format(time.RFC3339Nano))
				}
				if h.Fence <= prev.Fence {
					t.Errorf("%s: fences %d then %d, want them rising hold after hold", name, prev.Fence, h.Fence)
				}
			}
			if name == inventory.Handoff {
				if len(holds) == 0 || len(holds) > 2*ordersPerReplica || outcomes[HoldSold] == 0 ||
					outcomes[HoldSold]+outcomes[HoldSoldOut] != len(holds) {
					t.Errorf("%s: %d holds with outcomes %v, want 1 to %d holds, sold or sold-out, at least one sold",
						name, len(holds), outcomes, 2*ordersPerReplica)
				}
				return
			}
			want := map[string]int{HoldSold: units, HoldSoldOut: 2*ordersPerReplica - units}
			if len(holds) != 2*ordersPerReplica || outcomes[HoldSold] != want[HoldSold] || outcomes[HoldSoldOut] != want[HoldSoldOut] {
				t.Errorf("%s: %d holds with outcomes %v, want %d: %v", name, len(holds), outcomes, 2*ordersPerReplica, want)
			}
		})
	}
}

// TestUnfencedLockHolds: local and setnx record their holds with fence 0.
func TestUnfencedLockHolds(t *testing.T) {
	for _, name := range []string{inventory.Local, inventory.SetNX} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			id := "holds-" + name
			e.restock(t, id, 1)
			s, holds := e.holdingReplica(t, name, "replica-a", 0)
			for range 2 {
				_, _ = s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1})
			}
			got := holds.For(id)
			if len(got) != 2 || got[0].Outcome != HoldSold || got[1].Outcome != HoldSoldOut || got[0].Fence != 0 || got[1].Fence != 0 {
				t.Errorf("%s: holds %+v, want two with fence 0: %q then %q", name, got, HoldSold, HoldSoldOut)
			}
		})
	}
}

// TestUnlockedStrategiesRecordNoHolds: strategies without an application
// lock leave the log empty.
func TestUnlockedStrategiesRecordNoHolds(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{inventory.None, inventory.Optimistic, inventory.Lua, inventory.Atomic, inventory.ForUpdate, inventory.Batch} {
		id := "holds-" + name
		e.restock(t, id, 1)
		s, holds := e.holdingReplica(t, name, "replica-a", 0)
		if _, err := s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1}); err != nil {
			t.Fatalf("%s: Sell(%q, 1) = %v", name, id, err)
		}
		if got := holds.For(id); len(got) != 0 {
			t.Errorf("%s: holds %+v, want none (no application lock)", name, got)
		}
	}
}
