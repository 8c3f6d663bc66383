package redlock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"inventory/internal/lock/redislock"
	"inventory/internal/testenv"
)

// BenchmarkLockRelease measures uncontended Lock+Release on one key, in the
// same run: this package over the three test servers, redsync over the
// same three, and package redislock's Mutex on the first of them.
// Reported: p50 and p99 of Lock+Release, p50 of Lock alone.
func BenchmarkLockRelease(b *testing.B) {
	urls := testenv.FlushRedlock(b)
	ctx := context.Background()
	type impl struct {
		name string
		lock func(key string) (release func() error, err error)
	}
	ours := New(clients(b, urls), Options{})
	mu := redislock.NewMutex(clients(b, urls[:1])[0], redislock.Options{})
	b.Cleanup(mu.Close)
	var pools []redsyncredis.Pool
	for _, c := range clients(b, urls) {
		pools = append(pools, goredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	impls := []impl{
		{"redlock-3", func(key string) (func() error, error) {
			l, err := ours.Lock(ctx, key)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(ctx) }, nil
		}},
		{"redsync-3", func(key string) (func() error, error) {
			m := rs.NewMutex(key)
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() error { _, err := m.UnlockContext(ctx); return err }, nil
		}},
		{"redis-mutex-1", func(key string) (func() error, error) {
			l, err := mu.Lock(ctx, key)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(ctx) }, nil
		}},
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			key := "lock:{bench-" + im.name + "}"
			for range 10 { // warm up: connections open, scripts cached, counters there
				release, err := im.lock(key)
				if err != nil {
					b.Fatalf("warm-up Lock: %v", err)
				}
				_ = release()
			}
			total := make([]time.Duration, 0, b.N)
			acq := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				release, err := im.lock(key)
				t1 := time.Now()
				if err != nil {
					b.Fatalf("Lock: %v", err)
				}
				if err := release(); err != nil {
					b.Fatalf("Release: %v", err)
				}
				acq = append(acq, t1.Sub(t0))
				total = append(total, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(total)
			slices.Sort(acq)
			b.ReportMetric(float64(total[len(total)/2].Microseconds()), "p50-lock+release-µs")
			b.ReportMetric(float64(total[len(total)*99/100].Microseconds()), "p99-lock+release-µs")
			b.ReportMetric(float64(acq[len(acq)/2].Microseconds()), "p50-lock-µs")
		})
	}
}
