package productcache

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkACrowdReadingOneProduct is the crowd on the product page: 500
// readers on five replicas read one product in a loop, with the default
// TTL (1 s), through every expiry the run lasts. It reports the Postgres
// reads per second (pg-reads/s), the answers per second, and the Postgres
// reads per thousand answers. Run it for several TTLs:
//
//	go test -run '^$' -bench ACrowd -benchtime 10s ./internal/productcache/
func BenchmarkACrowdReadingOneProduct(b *testing.B) {
	for _, mode := range []Mode{NoLock, Lock} {
		b.Run(string(mode), func(b *testing.B) {
			be := newBackends(b)
			be.product(b, "hot", 100)
			reads := &loads{load: be.store.Product}
			const replicas = 5
			rs := make([]*replica, replicas)
			for i := range rs {
				rs[i] = be.replica(b, reads, Options{Mode: mode})
			}
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(500 / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				c := rs[next.Add(1)%replicas]
				for pb.Next() {
					if _, err := c.Get(ctx, "hot"); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			n := float64(reads.n.Load())
			b.ReportMetric(n/elapsed.Seconds(), "pg-reads/s")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "answers/s")
			b.ReportMetric(1000*n/float64(b.N), "pg-reads/1000-answers")
		})
	}
}
