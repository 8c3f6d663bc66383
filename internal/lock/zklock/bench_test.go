package zklock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// tripCounter is an Observer that adds up the requests acquisitions made.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) Acquired(_ string, _ error, _ time.Duration, trips int) {
	c.n.Add(int64(trips))
}
func (c *tripCounter) Lost(string, error)                    {}
func (c *tripCounter) Renewed(string, error)                 {}
func (c *tripCounter) Released(string, time.Duration, error) {}

// BenchmarkLockRelease measures Lock+Release on one key: uncontended (1
// goroutine) and contended (8 goroutines over two Lockers, as two
// replicas), empty critical section, against the test ZooKeeper (local,
// forceSync=no). Reported: acquisitions/s, p50/p99 wait inside Lock, p50
// of Lock+Release together, and requests per acquisition (the release's
// delete included). Compare with internal/lock/redislock's BenchmarkLock/Mutex.
func BenchmarkLockRelease(b *testing.B) {
	servers := testenv.ZooKeeperServers(b)
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			var trips tripCounter
			root := testRoot(b)
			opts := Options{Options: lock.Options{Observer: &trips}, Root: root}
			lockers := []*Locker{newLocker(b, servers, opts), newLocker(b, servers, opts)}
			ctx := context.Background()
			for _, l := range lockers { // warm up: parent created, connection busy
				lease, err := l.Lock(ctx, "bench")
				if err != nil {
					b.Fatalf("warm-up Lock: %v", err)
				}
				_ = lease.Release(ctx)
			}
			trips.n.Store(0)
			var next, failed atomic.Int64
			waits := make([][]time.Duration, n)
			pairs := make([][]time.Duration, n)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := range n {
				wg.Go(func() {
					l := lockers[g%2]
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						lease, err := l.Lock(ctx, "bench")
						if err != nil {
							failed.Add(1)
							continue
						}
						waits[g] = append(waits[g], time.Since(t0))
						if err := lease.Release(ctx); err != nil {
							failed.Add(1)
						}
						pairs[g] = append(pairs[g], time.Since(t0))
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
			both := slices.Concat(pairs...)
			slices.Sort(both)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-wait-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-wait-µs")
			b.ReportMetric(float64(both[len(both)/2].Microseconds()), "p50-lock+release-µs")
			b.ReportMetric(float64(trips.n.Load()+int64(b.N))/float64(b.N), "reqs/acq")
		})
	}
}
