package stock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// batch queues the sales inside a replica and commits them together: safe,
// each group of sales is one transaction that locks its products' rows
// once (in product order), gives each product's units to its orders in
// arrival order, writes the guarded decrements and every ledger row in one
// statement, and commits; a buyer hears of its sale only after that COMMIT.
// One commit then carries many sales, so a hot product sells faster than
// Postgres commits one-sale transactions on its row, and many products
// with few buyers each still share commits (group commit across products).
//
// There is no timer: a group is whatever queued while the previous one was
// committing, so a lone buyer is not delayed, and groups grow with the load.
//
// The queue and its committer are shared with handoff, which queues each
// product apart and sells each batch under a Redis lock instead (sell).
type batch struct {
	d Deps
	// queueOf names the queue order o waits in: one for the whole replica
	// (batch) or its product's (handoff).
	queueOf func(o inventory.Order) string
	// sell sells one batch of the orders of queue, answering each.
	sell func(ctx context.Context, queue string, orders []inventory.Order) []postgres.BatchAnswer

	mu     sync.Mutex
	queues map[string]*batchQueue // queue name → its queue, while it has a committer
}

// batchQueue is one queue's waiting orders; a committer goroutine exists
// exactly while the queue is in batch.queues.
type batchQueue struct {
	waiting []*batchOrder
	// queued counts the waiting orders by product, for maxBatchQueue.
	queued map[string]int
}

type batchOrder struct {
	o      inventory.Order
	answer chan postgres.BatchAnswer // buffered: the committer never blocks on a buyer
}

const (
	// maxBatchQueue bounds the orders of one product waiting in one replica
	// (Admission usually refuses buyers before this): beyond it, ErrOverloaded.
	maxBatchQueue = 4096
	// maxBatchSize bounds one batch's (or group's) transaction.
	maxBatchSize = 1000
	// batchTimeout bounds one batch's transaction, which runs detached from
	// any buyer's request.
	batchTimeout = 30 * time.Second
)

func newBatch(d Deps) *batch {
	return &batch{d: d, queueOf: func(inventory.Order) string { return "" }, queues: map[string]*batchQueue{},
		sell: func(ctx context.Context, _ string, orders []inventory.Order) []postgres.BatchAnswer {
			return d.Store.RecordGroup(ctx, inventory.Batch, d.Instance, orders)
		}}
}

// newQueued is a strategy that queues each product's orders in this replica
// apart and sells them a batch at a time by sellBatch.
func newQueued(d Deps, sellBatch func(ctx context.Context, id string, orders []inventory.Order) []postgres.BatchAnswer) *batch {
	return &batch{d: d, queueOf: func(o inventory.Order) string { return o.ProductID }, sell: sellBatch, queues: map[string]*batchQueue{}}
}

// Sell queues o and waits for its batch (or group). A buyer that gives up
// while its order is still queued takes it out; once its batch has begun,
// it waits for the batch's answer, since the sale may commit.
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

// enqueue adds bo to its queue, starting the queue's committer when it has
// none.
func (s *batch) enqueue(bo *batchOrder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, id := s.queueOf(bo.o), bo.o.ProductID
	q, running := s.queues[name]
	if !running {
		q = &batchQueue{queued: map[string]int{}}
		s.queues[name] = q
		go s.commit(name, q)
	}
	if n := q.queued[id]; n >= maxBatchQueue {
		return fmt.Errorf("%d orders of %q already queued for a batch: %w", n, id, inventory.ErrOverloaded)
	}
	q.waiting = append(q.waiting, bo)
	q.queued[id]++
	return nil
}

// withdraw takes bo out of its queue if no batch has taken it yet.
func (s *batch) withdraw(bo *batchOrder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[s.queueOf(bo.o)]
	if q == nil {
		return false
	}
	i := slices.Index(q.waiting, bo)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	q.dequeued(bo.o.ProductID, 1)
	return true
}

// dequeued forgets n orders of product id taken out of q.
func (q *batchQueue) dequeued(id string, n int) {
	if q.queued[id] -= n; q.queued[id] <= 0 {
		delete(q.queued, id)
	}
}

// next takes the next batch of queue q, the oldest orders first (so each
// product's orders stay in arrival order); when the queue is empty it
// retires the committer (nil) under the same lock, so an order queued later
// starts a new one.
func (s *batch) next(name string, q *batchQueue) []*batchOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(q.waiting) == 0 {
		delete(s.queues, name)
		return nil
	}
	n := min(len(q.waiting), maxBatchSize)
	taken := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	for _, bo := range taken {
		q.dequeued(bo.o.ProductID, 1)
	}
	return taken
}

// commit is queue name's committer: it commits batch after batch until the
// queue is empty.
func (s *batch) commit(name string, q *batchQueue) {
	for {
		taken := s.next(name, q)
		if taken == nil {
			return
		}
		orders := make([]inventory.Order, len(taken))
		for i, bo := range taken {
			orders[i] = bo.o
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		answers := s.sell(ctx, name, orders)
		cancel()
		for i, bo := range taken {
			bo.answer <- answers[i]
		}
	}
}

var _ inventory.Seller = (*batch)(nil)
