package load

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apiclient "inventory/internal/client"
)

// Reads is what a run's anonymous readers got (Config.Readers): the
// requests answered 2xx and those that were not, by status ("none" for no
// answer at all).
type Reads struct {
	Readers int              `json:"readers"`
	OK      int64            `json:"ok"`
	Failed  map[string]int64 `json:"failed,omitempty"`
	PerSec  float64          `json:"per_s"`
}

// readers keeps n anonymous readers busy against the fleet until stop is
// called, each in a loop of GET /live?since=0 (the whole ledger since the
// first sale, as a new live page asks) and GET /products/{id}: what anyone
// on the internet may ask while a sale runs. They have a client of their
// own, so they do not take the buyers' connections in the load tester.
type readers struct {
	ok     atomic.Int64
	mu     sync.Mutex
	failed map[string]int64
	wg     sync.WaitGroup
	cancel context.CancelFunc
	api    *apiclient.Client
}

// startReaders starts n readers of product id (none when n is 0).
func (c *Client) startReaders(ctx context.Context, n int, id string) *readers {
	r := &readers{failed: map[string]int64{}}
	if n <= 0 {
		return r
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.api = apiclient.New(c.api.BaseURL(), apiclient.Options{Concurrency: n})
	for range n {
		r.wg.Go(func() {
			for ctx.Err() == nil {
				_, err := r.api.Live(ctx, 0)
				r.count(ctx, err)
				if ctx.Err() != nil {
					return
				}
				_, err = r.api.Product(ctx, id)
				r.count(ctx, err)
			}
		})
	}
	return r
}

func (r *readers) count(ctx context.Context, err error) {
	if err == nil {
		r.ok.Add(1)
		return
	}
	if ctx.Err() != nil {
		return // stopped mid-request: not the fleet's answer
	}
	kind := "none"
	if p, ok := errors.AsType[*apiclient.Problem](err); ok {
		kind = strings.TrimSpace(strconv.Itoa(p.Status) + " " + strings.TrimPrefix(p.Type, "urn:inventory:problem:"))
	}
	r.mu.Lock()
	r.failed[kind]++
	r.mu.Unlock()
}

// stop stops the readers and waits for them; seconds is how long they read.
func (r *readers) stop(n int, seconds float64) *Reads {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.wg.Wait()
	r.api.CloseIdleConnections()
	out := &Reads{Readers: n, OK: r.ok.Load(), PerSec: float64(r.ok.Load()) / seconds}
	if len(r.failed) > 0 {
		out.Failed = r.failed
	}
	return out
}
