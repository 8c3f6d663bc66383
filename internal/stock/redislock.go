package stock

import (
	"context"
	"fmt"
)

// pending stands in for the redis and reentrant strategies until
// internal/lock's Mutex and Reentrant exist; every Sell fails.
type pending struct{ name string }

func newRedisLock(d Deps) Seller { return pending{RedisLock} }
func newReentrant(d Deps) Seller { return pending{Reentrant} }

// Sell refuses: the strategy is not written yet.
func (p pending) Sell(ctx context.Context, o Order) (Sale, error) {
	return Sale{}, fmt.Errorf("strategy %q: waiting for internal/lock: %w", p.name, ErrUnavailable)
}
