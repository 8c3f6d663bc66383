package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// countHook counts the commands a client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

type benchLocker struct {
	name string
	new  func(b *testing.B, rdb redis.UniversalClient, opts Options) func(ctx context.Context, g int, key string) (lock.Lease, error)
}

var benchLockers = []benchLocker{
	{"Mutex", func(b *testing.B, rdb redis.UniversalClient, opts Options) func(context.Context, int, string) (lock.Lease, error) {
		m := NewMutex(rdb, opts)
		b.Cleanup(m.Close)
		return func(ctx context.Context, _ int, key string) (lock.Lease, error) { return m.Lock(ctx, key) }
	}},
	{"Reentrant", func(b *testing.B, rdb redis.UniversalClient, opts Options) func(context.Context, int, string) (lock.Lease, error) {
		r := NewReentrant(rdb, opts)
		b.Cleanup(r.Close)
		return func(ctx context.Context, g int, key string) (lock.Lease, error) {
			return r.Lock(lock.WithOwner(ctx, fmt.Sprint("g", g)), key)
		}
	}},
}

// BenchmarkLock measures Lock+Release on one key, waiting by release
// notices ("notified", the default) and by backoff polling ("polling",
// Options.PollOnly), in the same run: uncontended (1 goroutine) and
// contended (8 and 64 goroutines over two clients, as two replicas), with
// an empty critical section and with 1ms of work in it, and 512 goroutines
// with 1ms of work (a crowd larger than the clients' connection pools, as
// at the load tester's 1500 buyers at once). Reported:
// acquisitions/s, p50/p99/max wait inside Lock, and Redis commands per
// acquisition (acquire tries, renewals and the release; not the few
// SUBSCRIBE and PING commands on the notifier's own connection).
func BenchmarkLock(b *testing.B) {
	url := testenv.RedisURL(b)
	cases := []struct {
		goroutines int
		work       time.Duration
	}{{1, 0}, {8, 0}, {64, 0}, {8, time.Millisecond}, {64, time.Millisecond}, {512, time.Millisecond}}
	for _, bl := range benchLockers {
		for _, c := range cases {
			for _, mode := range []string{"notified", "polling"} {
				name := fmt.Sprintf("%s/goroutines=%d/work=%v/%s", bl.name, c.goroutines, c.work, mode)
				b.Run(name, func(b *testing.B) {
					opts := Options{PollOnly: mode == "polling"}
					benchLock(b, url, bl, opts, c.goroutines, c.work, fmt.Sprintf("lock:{bench-%s-%d-%v-%s}", bl.name, c.goroutines, c.work, mode))
				})
			}
		}
	}
}

func benchLock(b *testing.B, url string, bl benchLocker, opts Options, n int, work time.Duration, key string) {
	var cmds atomic.Int64
	rdbs := []*redis.Client{client(b, url, countHook{&cmds}), client(b, url, countHook{&cmds})}
	locks := []func(context.Context, int, string) (lock.Lease, error){bl.new(b, rdbs[0], opts), bl.new(b, rdbs[1], opts)}
	ctx := context.Background()
	// Warm up: scripts loaded, fence counter created, connections open.
	for g := range 2 {
		l, err := locks[g](ctx, g, key)
		if err != nil {
			b.Fatalf("warm-up Lock: %v", err)
		}
		_ = l.Release(ctx)
	}
	cmds.Store(0)
	var next atomic.Int64
	waits := make([][]time.Duration, n)
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range n {
		wg.Go(func() {
			lock := locks[g%2]
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				l, err := lock(ctx, g, key)
				if err != nil {
					failed.Add(1)
					continue
				}
				waits[g] = append(waits[g], time.Since(t0))
				if work > 0 {
					time.Sleep(work) // the critical section's work
				}
				if err := l.Release(ctx); err != nil {
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
	b.ReportMetric(float64(cmds.Load())/float64(b.N), "cmds/acq")
}
