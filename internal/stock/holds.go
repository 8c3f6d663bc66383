package stock

import (
	"errors"
	"slices"
	"sync"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// Holds: each critical section run under a lock strategy's lock, recorded
// so that overlapping holders can be measured from outside (the fault
// matrix reads them from every replica) instead of guessed from breaches.

// Outcomes of a hold: what its holder did under the lock.
const (
	// HoldSold: the holder's sale committed.
	HoldSold = "sold"
	// HoldReplayed: the order's Idempotency-Key had already sold; the
	// holder wrote nothing.
	HoldReplayed = "replayed"
	// HoldSoldOut: too few units left; nothing written.
	HoldSoldOut = "sold-out"
	// HoldLockLost: the lease was lost under the holder, or the database
	// caught a breach (a stale fence, the guard); rolled back.
	HoldLockLost = "lock-lost"
	// HoldUnknown: the COMMIT's answer never came and the ledger could not
	// tell; the holder may have sold.
	HoldUnknown = "unknown"
	// HoldError: any other failure; rolled back.
	HoldError = "error"
)

// DefaultHoldCapacity is how many holds NewHoldLog keeps unless told otherwise.
const DefaultHoldCapacity = 100_000

// Hold is one critical section under a strategy's lock.
type Hold struct {
	Strategy string
	// Fence is the lease's fencing token; 0 for a lock without one (local, setnx).
	Fence int64
	// Start is when the lock was granted; End when the holder stopped
	// acting under it (its transaction committed or rolled back), before
	// the release. End is zero while the hold is open.
	Start, End time.Time
	// Outcome is one of the Hold* constants; empty while open.
	Outcome string
}

// HoldLog keeps the most recent holds of this process, of every product, in
// a ring. It is safe for concurrent use; a nil *HoldLog records nothing.
type HoldLog struct {
	capacity int

	mu      sync.Mutex
	entries []holdEntry // grows to capacity, then wraps
	last    uint64      // sequence number of the newest entry; entry seq lives at (seq-1) % capacity
}

type holdEntry struct {
	product string
	seq     uint64
	hold    Hold
}

// NewHoldLog returns a log of the capacity most recent holds
// (DefaultHoldCapacity when capacity < 1). Its memory grows with use, up to
// about 110 bytes a hold.
func NewHoldLog(capacity int) *HoldLog {
	if capacity < 1 {
		capacity = DefaultHoldCapacity
	}
	return &HoldLog{capacity: capacity}
}

// OpenHold is a hold begun and not yet ended. The zero value (what a nil
// *HoldLog begins) records nothing.
type OpenHold struct {
	log *HoldLog
	seq uint64
}

// Begin records that strategy's lock on product was just granted, with
// fencing token fence (0 if none), and returns the hold to End.
func (l *HoldLog) Begin(product, strategy string, fence int64) OpenHold {
	if l == nil {
		return OpenHold{}
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	e := holdEntry{product: product, seq: l.last, hold: Hold{Strategy: strategy, Fence: fence, Start: now}}
	if len(l.entries) < l.capacity {
		l.entries = append(l.entries, e)
	} else {
		l.entries[l.slot(e.seq)] = e
	}
	return OpenHold{log: l, seq: e.seq}
}

// End records that the holder stopped acting under the lock, with outcome
// (a Hold* constant). A hold already pushed out of the ring is forgotten.
func (h OpenHold) End(outcome string) {
	if h.log == nil {
		return
	}
	now := time.Now()
	l := h.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := &l.entries[l.slot(h.seq)]; e.seq == h.seq && e.hold.End.IsZero() {
		e.hold.End, e.hold.Outcome = now, outcome
	}
}

// done ends h with the outcome of a sale that returned sale and err, and
// passes them on (the zero Sale with an error), so that a strategy ends its
// hold and answers in one statement.
func (h OpenHold) done(sale inventory.Sale, err error) (inventory.Sale, error) {
	h.End(saleOutcome(sale, err))
	if err != nil {
		return inventory.Sale{}, err
	}
	return sale, nil
}

// slot is the index of entry seq in the ring.
func (l *HoldLog) slot(seq uint64) int { return int((seq - 1) % uint64(l.capacity)) }

// For returns the holds of product still in the log, open ones included
// (End zero), oldest first.
func (l *HoldLog) For(product string) []Hold {
	if l == nil {
		return nil
	}
	var holds []Hold
	l.mu.Lock()
	// Oldest first: once the ring wraps, the oldest is the slot after the newest.
	start := 0
	if len(l.entries) == l.capacity {
		start = int(l.last % uint64(l.capacity))
	}
	for i := range len(l.entries) {
		if e := &l.entries[(start+i)%len(l.entries)]; e.product == product {
			holds = append(holds, e.hold)
		}
	}
	l.mu.Unlock()
	// Start is read before Begin's lock, so two holders granted at once can
	// be logged in the other order.
	slices.SortStableFunc(holds, func(a, b Hold) int { return a.Start.Compare(b.Start) })
	return holds
}

// saleOutcome is the outcome of a critical section that returned sale and err.
func saleOutcome(sale inventory.Sale, err error) string {
	switch {
	case err == nil && sale.Replayed:
		return HoldReplayed
	case err == nil:
		return HoldSold
	case errors.Is(err, inventory.ErrLockLost), errors.Is(err, inventory.ErrLockBreach):
		return HoldLockLost
	case errors.Is(err, inventory.ErrOutcomeUnknown):
		return HoldUnknown
	case errors.Is(err, inventory.ErrSoldOut):
		return HoldSoldOut
	}
	return HoldError
}

// holdRank orders outcomes by what a batch's hold reports when its orders
// ended differently: a lost lock above all, then a possible sale, then a sale.
var holdRank = map[string]int{HoldLockLost: 6, HoldUnknown: 5, HoldSold: 4, HoldError: 3, HoldSoldOut: 2, HoldReplayed: 1}

// batchOutcome is the outcome of a critical section that sold a batch and
// answered each order with answers.
func batchOutcome(answers []postgres.BatchAnswer) string {
	outcome := ""
	for _, a := range answers {
		o := saleOutcome(a.Sale, a.Err)
		if a.Replay && a.Err == nil {
			o = HoldReplayed
		}
		if holdRank[o] > holdRank[outcome] {
			outcome = o
		}
	}
	if outcome == "" {
		return HoldError // no orders: nothing was tried
	}
	return outcome
}
