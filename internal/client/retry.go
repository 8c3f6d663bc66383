package client

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Retry is how a buyer sends a sale again after an answer that did not
// settle it, as a well-behaved client does: after a doubling backoff, or
// after the answer's Retry-After when that is longer. The zero value sends
// once.
type Retry struct {
	// Max is how many times the sale is sent again at most.
	Max int
	// Backoff is the wait before the first retry, doubled before each
	// next one; default 50 ms.
	Backoff time.Duration
	// MaxRetryAfter caps how long a Retry-After is honoured; default 5 s.
	MaxRetryAfter time.Duration
}

// Do calls sell, and calls it again while its answer is Retryable, at most
// r.Max times, waiting r.Wait before each. It returns the last answer and
// how many times it sent the sale again; when ctx ends during a wait it
// returns the answer it has.
//
// Every call of sell must send the same order with the same
// Idempotency-Key: then a sale that did happen is answered again instead
// of being made twice. Without a key, a sale must not be retried.
func (r Retry) Do(ctx context.Context, sell func(context.Context) (Sale, error)) (Sale, int, error) {
	sale, err := sell(ctx)
	for try := range r.Max {
		if !Retryable(err) || !sleep(ctx, r.Wait(try, err)) {
			return sale, try, err
		}
		sale, err = sell(ctx)
	}
	return sale, r.Max, err
}

// Wait is how long to wait before retry number try (from 0) after err: the
// doubling backoff, or err's Retry-After (at most r.MaxRetryAfter) when
// that is longer.
func (r Retry) Wait(try int, err error) time.Duration {
	backoff, most := r.Backoff, r.MaxRetryAfter
	if backoff <= 0 {
		backoff = 50 * time.Millisecond
	}
	if most <= 0 {
		most = 5 * time.Second
	}
	var after time.Duration
	var p *Problem
	if errors.As(err, &p) {
		after = min(p.RetryAfter, most)
	}
	return max(backoff<<min(try, 30), after)
}

// Retryable reports whether a sale answered with err may go otherwise if
// sent again with the same Idempotency-Key: no answer came back (it may or
// may not have sold), or the answer was a 408, a 429 or a 5xx (503
// outcome-unknown included). A sale (nil), a 409 sold-out and every other
// 4xx are final, and so is a 2xx whose body could not be read
// (ErrMalformedAnswer).
func Retryable(err error) bool {
	if err == nil || errors.Is(err, ErrMalformedAnswer) {
		return false
	}
	var p *Problem
	if !errors.As(err, &p) {
		return true
	}
	return p.Status >= 500 || p.Status == http.StatusRequestTimeout || p.Status == http.StatusTooManyRequests
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
