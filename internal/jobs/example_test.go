package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inventory/internal/jobs"
	"inventory/internal/lock"
	"inventory/internal/lock/memlock"
)

// A job that every replica runs a Runner of, and one replica at a time
// runs: here on memlock, in the service on the fleet's lock backend (a
// renewing kind, such as redislock's "reentrant"). The job writes its
// fence with its work, so that the storage refuses an ex-runner's.
func ExampleNew() {
	locker := memlock.New(memlock.NewServer(), lock.Options{TTL: 30 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	sweep := func(ctx context.Context, fence lock.Fence) error {
		// e.g. UPDATE orders SET state = 'expired' … in a transaction that
		// first claims fence for this job, refused if a larger one was seen.
		fmt.Println("sweeping with fence", fence.Backend, fence.Token)
		stop() // one run is enough for the example
		return nil
	}
	r := jobs.New(locker, "lock:{job-order-expiry}", sweep, jobs.Options{
		Name:     "order-expiry",
		Interval: time.Second, // INVENTORY_ORDER_SWEEP_INTERVAL
		Metrics:  jobs.NewMetrics(prometheus.NewRegistry()),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err := r.Run(ctx); err != nil { // until ctx ends; then it releases the lock
		fmt.Println(err)
	}
	// Output: sweeping with fence memlock 1
}
