package stock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
)

// batch queues the sales of each product inside a replica and commits them
// together: safe, each batch is one transaction that locks the product's row
// once, gives units in arrival order, writes a guarded decrement and every
// ledger row, and commits; a buyer hears of its sale only after that COMMIT.
// One commit then carries many sales, so a hot product sells faster than
// Postgres commits one-sale transactions on its row.
//
// There is no timer: a batch is whatever queued while the previous one was
// committing, so a lone buyer is not delayed, and batches grow with the load.
//
// The queue and its committer are shared with handoff, which sells each
// batch under a Redis lock instead (sellBatch).
type batch struct {
	d Deps
	// sellBatch sells one batch of product id's orders, answering each.
	sellBatch func(ctx context.Context, id string, orders []inventory.Order) []postgres.BatchAnswer

	mu     sync.Mutex
	queues map[string]*batchQueue // product id → its queue, while it has a committer
}

// batchQueue is one product's waiting orders; a committer goroutine exists
// exactly while the queue is in batch.queues.
type batchQueue struct {
	waiting []*batchOrder
}

type batchOrder struct {
	o      inventory.Order
	answer chan postgres.BatchAnswer // buffered: the committer never blocks on a buyer
}

const (
	// maxBatchQueue bounds the orders of one product waiting in one replica
	// (Admission usually refuses buyers before this): beyond it, ErrOverloaded.
	maxBatchQueue = 4096
	// maxBatchSize bounds one batch's transaction.
	maxBatchSize = 1000
	// batchTimeout bounds one batch's transaction, which runs detached from
	// any buyer's request.
	batchTimeout = 30 * time.Second
)

func newBatch(d Deps) *batch {
	return newQueued(d, func(ctx context.Context, id string, orders []inventory.Order) []postgres.BatchAnswer {
		return d.Store.RecordBatch(ctx, id, inventory.Batch, d.Instance, lock.Fence{}, orders)
	})
}

// newQueued is a strategy that queues each product's orders in this replica
// and sells them a batch at a time by sellBatch.
func newQueued(d Deps, sellBatch func(ctx context.Context, id string, orders []inventory.Order) []postgres.BatchAnswer) *batch {
	return &batch{d: d, sellBatch: sellBatch, queues: map[string]*batchQueue{}}
}

// Sell queues o and waits for its batch. A buyer that gives up while its
// order is still queued takes it out; once its batch has begun, it waits for
// the batch's answer, since the sale may commit.
func (s *batch) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	bo := &batchOrder{o: o, answer: make(chan postgres.BatchAnswer, 1)}
	if err := s.enqueue(bo); err != nil {
		return inventory.Sale{}, err
	}
	var a postgres.BatchAnswer
	select {
	case a = <-bo.answer:
	case <-ctx.Done():
		if s.withdraw(bo) {
			return inventory.Sale{}, fmt.Errorf("waiting for a batch: %w", inventory.Interrupted(ctx))
		}
		a = <-bo.answer
	}
	if a.Replay {
		// The key was taken meanwhile: the ledger has the sale it names.
		sale, found, err := s.d.Store.Replay(context.WithoutCancel(ctx), o)
		if err == nil && !found {
			err = fmt.Errorf("idempotency key %q: taken but its sale cannot be read", o.IdempotencyKey)
		}
		return sale, err
	}
	return a.Sale, a.Err
}

// enqueue adds bo to its product's queue, starting the product's committer
// when it has none.
func (s *batch) enqueue(bo *batchOrder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := bo.o.ProductID
	q, running := s.queues[id]
	if !running {
		q = &batchQueue{}
		s.queues[id] = q
		go s.commit(id, q)
	}
	if len(q.waiting) >= maxBatchQueue {
		return fmt.Errorf("%d orders of %q already queued for a batch: %w", len(q.waiting), id, inventory.ErrOverloaded)
	}
	q.waiting = append(q.waiting, bo)
	return nil
}

// withdraw takes bo out of its queue if no batch has taken it yet.
func (s *batch) withdraw(bo *batchOrder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[bo.o.ProductID]
	if q == nil {
		return false
	}
	i := slices.Index(q.waiting, bo)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// next takes the next batch of product id's queue; when the queue is empty
// it retires the committer (nil) under the same lock, so an order queued
// later starts a new one.
func (s *batch) next(id string, q *batchQueue) []*batchOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(q.waiting) == 0 {
		delete(s.queues, id)
		return nil
	}
	n := min(len(q.waiting), maxBatchSize)
	taken := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	return taken
}

// commit is product id's committer: it commits batch after batch until the
// queue is empty.
func (s *batch) commit(id string, q *batchQueue) {
	for {
		taken := s.next(id, q)
		if taken == nil {
			return
		}
		orders := make([]inventory.Order, len(taken))
		for i, bo := range taken {
			orders[i] = bo.o
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		answers := s.sellBatch(ctx, id, orders)
		cancel()
		for i, bo := range taken {
			bo.answer <- answers[i]
		}
	}
}

var _ inventory.Seller = (*batch)(nil)
