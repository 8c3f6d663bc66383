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
// own, so they do not take the buyers' connections in the load tester. A
// stop lets each reader's request in flight be answered (and counted), so
// that every reader that started has an answer to show however short the
// run; only the run's own context cuts a request off.
type readers struct {
	ok      atomic.Int64
	mu      sync.Mutex
	failed  map[string]int64
	wg      sync.WaitGroup
	stopped chan struct{}
	api     *apiclient.Client
}

// startReaders starts n readers of product id (none when n is 0).
func (c *Client) startReaders(ctx context.Context, n int, id string) *readers {
	r := &readers{failed: map[string]int64{}}
	if n <= 0 {
		return r
	}
	r.stopped = make(chan struct{})
	r.api = apiclient.New(c.api.BaseURL(), apiclient.Options{Concurrency: n})
	for range n {
		r.wg.Go(func() {
			for r.reading(ctx) {
				_, err := r.api.Live(ctx, 0)
				r.count(ctx, err)
				if !r.reading(ctx) {
					return
				}
				_, err = r.api.ProductCached(ctx, id)
				r.count(ctx, err)
			}
		})
	}
	return r
}

// reading reports whether the readers are to go on: not stopped, and the
// run not ended.
func (r *readers) reading(ctx context.Context) bool {
	select {
	case <-r.stopped:
		return false
	default:
		return ctx.Err() == nil
	}
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
	if r.stopped == nil {
		return nil
	}
	close(r.stopped)
	r.wg.Wait()
	r.api.CloseIdleConnections()
	out := &Reads{Readers: n, OK: r.ok.Load(), PerSec: float64(r.ok.Load()) / seconds}
	if len(r.failed) > 0 {
		out.Failed = r.failed
	}
	return out
}
