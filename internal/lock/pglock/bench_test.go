package pglock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/lock"
)

// tripCounter is an Observer that adds up the statements acquisitions ran.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) Acquired(_ string, _ error, _ time.Duration, trips int) {
	c.n.Add(int64(trips))
}
func (c *tripCounter) Lost(string, error)                    {}
func (c *tripCounter) Renewed(string, error)                 {}
func (c *tripCounter) Released(string, time.Duration, error) {}

// BenchmarkLock measures Lock+Release on one name, as internal/lock/redislock's
// BenchmarkLock does for the Redis locks: uncontended (1 goroutine) and
// contended (8 and 64 goroutines over two pools, as two replicas).
// Reported: acquisitions/s, p50/p99/max wait inside Lock, and statements
// per acquisition (acquire tries and the release).
func BenchmarkLock(b *testing.B) {
	url, pool := newDB(b)
	pools := []*pgxpool.Pool{pool, newPool(b, url)}
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			var trips tripCounter
			lockers := []*Locker{New(pools[0], Options{Options: lock.Options{Observer: &trips}}), New(pools[1], Options{Options: lock.Options{Observer: &trips}})}
			name := fmt.Sprintf("lock:{bench-%d}", n)
			ctx := context.Background()
			for _, l := range lockers { // warm up: row created, connections open
				lease, err := l.Lock(ctx, name)
				if err != nil {
					b.Fatalf("warm-up Lock: %v", err)
				}
				_ = lease.Release(ctx)
			}
			trips.n.Store(0)
			var next, failed atomic.Int64
			waits := make([][]time.Duration, n)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := range n {
				wg.Go(func() {
					l := lockers[g%2]
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						lease, err := l.Lock(ctx, name)
						if err != nil {
							failed.Add(1)
							continue
						}
						waits[g] = append(waits[g], time.Since(t0))
						if err := lease.Release(ctx); err != nil {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d acquisitions or releases failed", f, b.N)
			}
			all := slices.Concat(waits...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-wait-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-wait-µs")
			b.ReportMetric(float64(all[len(all)-1].Microseconds()), "max-wait-µs")
			b.ReportMetric(float64(trips.n.Load()+int64(b.N))/float64(b.N), "stmts/acq")
		})
	}
}
