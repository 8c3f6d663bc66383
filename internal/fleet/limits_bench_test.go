package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"inventory/internal/client"
	"inventory/nginx"
)

// BenchmarkGatewayLimits measures what nginx's gateway limits are for
// (issue 26, item 4): at 10× the fleet's capacity from many clients, the
// goodput of sales should stay ≥ 80% of its unloaded rate and the p99 of
// admitted sales within 2× of the unloaded p99. Two durable fleets run side
// by side, limits off and on, and take turns, so that both meet the same
// moments of a shared machine. Sales go to the routed path
// POST /products/{id}/sale that the per-product limit covers, with the
// fleet default atomic. Each round:
//
//   - unloaded, limits off: limitsBuyers buyers in a closed loop (each
//     sends its next sale when answered): the capacity C, and the p99 the
//     flooded phases are compared with;
//   - unloaded, limits on: sales sent at C per second whatever the
//     answers (an open loop) from limitsClients loopback addresses: the
//     limits refuse (almost) nothing of a load the fleet can take;
//   - flooded, limits off, then on: the open loop at 10 × C.
//
// The limits on are derived from the first round's C: each client may send
// 2 × C / limitsClients per second (burst 10), and limitsBuyers sales of
// the product may be in flight. It logs every phase and reports each
// round's ratios; the figures belong in docs/performance.md.
//
//	go test -run '^$' -bench GatewayLimits -benchtime 2x ./internal/fleet/
func BenchmarkGatewayLimits(b *testing.B) {
	off := startLimitsFleet(b, nginx.Limits{}, true)
	capacity := off.closedLoop(b)
	on := startLimitsFleet(b, nginx.Limits{
		ClientRate:   int(math.Ceil(2 * capacity.goodput / limitsClients)),
		ClientBurst:  10,
		ProductSales: 2 * limitsBuyers,
	}, false)
	b.Logf("limits on: %+v", on.limits)
	b.ResetTimer()
	for round := 1; round <= b.N; round++ {
		unloaded := off.closedLoop(b)
		onUnloaded := on.openLoop(b, unloaded.goodput)
		offFlooded := off.openLoop(b, 10*unloaded.goodput)
		onFlooded := on.openLoop(b, 10*unloaded.goodput)
		b.Logf("round %d: unloaded, limits off, closed loop: %s", round, unloaded)
		b.Logf("round %d: unloaded, limits on, %.0f/s offered: %s", round, unloaded.goodput, onUnloaded)
		b.Logf("round %d: flooded, limits off, %.0f/s offered: %s; goodput %.2f × unloaded, p99 %.2f ×", round, 10*unloaded.goodput, offFlooded,
			offFlooded.goodput/unloaded.goodput, offFlooded.p99/unloaded.p99)
		b.Logf("round %d: flooded, limits on, %.0f/s offered: %s; goodput %.2f × unloaded, p99 %.2f ×", round, 10*unloaded.goodput, onFlooded,
			onFlooded.goodput/unloaded.goodput, onFlooded.p99/unloaded.p99)
		b.ReportMetric(offFlooded.goodput/unloaded.goodput, "off-goodput-ratio")
		b.ReportMetric(offFlooded.p99/unloaded.p99, "off-p99-ratio")
		b.ReportMetric(onFlooded.goodput/unloaded.goodput, "on-goodput-ratio")
		b.ReportMetric(onFlooded.p99/unloaded.p99, "on-p99-ratio")
	}
}

const (
	limitsClients = 100              // loopback source addresses of the buyers
	limitsBuyers  = 16               // closed-loop buyers of the unloaded phase
	limitsPhase   = 15 * time.Second // each phase's length
	limitsProduct = "sku-limits"
)

// phase is what one phase's answers came to.
type phase struct {
	goodput, p99 float64 // 2xx per second; the 2xx's p99 in ms
	sent, ok     int
	byStatus     map[int]int // every other answer; 0: no answer
	unsent       int         // flood sales the generator could not send (too many in flight)
}

func (p phase) String() string {
	return fmt.Sprintf("%.0f sales/s, p99 %.1f ms (%d sent, %d 2xx, others %v, unsent %d)", p.goodput, p.p99, p.sent, p.ok, p.byStatus, p.unsent)
}

// tally collects answers from many goroutines.
type tally struct {
	mu       sync.Mutex
	okMs     []float64
	byStatus map[int]int
	sent     int
}

func (t *tally) add(took time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent++
	var p *client.Problem
	switch {
	case err == nil:
		t.okMs = append(t.okMs, float64(took)/float64(time.Millisecond))
	case errors.As(err, &p):
		t.byStatus[p.Status]++
	default:
		t.byStatus[0]++
	}
}

func (t *tally) phase(elapsed time.Duration) phase {
	slices.Sort(t.okMs)
	p := phase{goodput: float64(len(t.okMs)) / elapsed.Seconds(), sent: t.sent, ok: len(t.okMs), byStatus: t.byStatus}
	if n := len(t.okMs); n > 0 {
		p.p99 = t.okMs[min(n-1, int(math.Ceil(0.99*float64(n)))-1)]
	}
	return p
}

// limitsFleet is one fleet of the benchmark and its buyers.
type limitsFleet struct {
	limits nginx.Limits
	buyers *client.Client
}

func startLimitsFleet(b *testing.B, limits nginx.Limits, off bool) *limitsFleet {
	ctx := context.Background()
	f, err := Start(ctx, Options{Replicas: 2, Binary: binary, AdminToken: "tok", Limits: limits, NoLimits: off, NoLockServices: true})
	if err != nil {
		b.Fatalf("Start: %v", err)
	}
	b.Cleanup(func() { _ = f.Stop() })
	admin := f.Client()
	if err := admin.SetStrategy(ctx, "atomic"); err != nil {
		b.Fatalf("PUT /strategy atomic: %v", err)
	}
	if _, err := admin.Restock(ctx, limitsProduct, client.RestockRequest{Quantity: 100_000_000}); err != nil {
		b.Fatalf("restock: %v", err)
	}
	sources, err := client.LoopbackSources(limitsClients)
	if err != nil {
		b.Fatal(err)
	}
	lf := &limitsFleet{limits: limits, buyers: client.New(f.URL, client.Options{Concurrency: limitsInFlight, LocalAddrs: sources})}
	b.Cleanup(lf.buyers.CloseIdleConnections)
	return lf
}

// limitsInFlight is the open loop's most sales in flight at once.
const limitsInFlight = 4000

func (lf *limitsFleet) sell(t *tally) {
	start := time.Now()
	_, err := lf.buyers.SellProduct(context.Background(), limitsProduct, client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{})
	t.add(time.Since(start), err)
}

// closedLoop runs limitsBuyers buyers for limitsPhase, each sending its
// next sale when answered.
func (lf *limitsFleet) closedLoop(b *testing.B) phase {
	t := &tally{byStatus: map[int]int{}}
	start := time.Now()
	var wg sync.WaitGroup
	for range limitsBuyers {
		wg.Go(func() {
			for time.Since(start) < limitsPhase {
				lf.sell(t)
			}
		})
	}
	wg.Wait()
	p := t.phase(time.Since(start))
	if p.ok == 0 {
		b.Fatalf("no sale went through, limits %+v: %s", lf.limits, p)
	}
	return p
}

// openLoop sends rate sales per second for limitsPhase, in a batch every
// 10ms whatever the answers; goodput is over the time until the last
// answer.
func (lf *limitsFleet) openLoop(b *testing.B, rate float64) phase {
	t := &tally{byStatus: map[int]int{}}
	slots := make(chan struct{}, limitsInFlight)
	unsent := 0
	var wg sync.WaitGroup
	tick := time.NewTicker(10 * time.Millisecond)
	start := time.Now()
	due := 0.0
	for now := range tick.C {
		if now.Sub(start) >= limitsPhase {
			break
		}
		due += rate * 0.01
		for ; due >= 1; due-- {
			select {
			case slots <- struct{}{}:
				wg.Go(func() {
					defer func() { <-slots }()
					lf.sell(t)
				})
			default:
				unsent++
			}
		}
	}
	tick.Stop()
	wg.Wait()
	p := t.phase(time.Since(start))
	p.unsent = unsent
	return p
}
