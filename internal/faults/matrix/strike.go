package matrix

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"inventory/internal/faults"
)

// strikeBoard lets the side-by-side runs of one round share a single
// injection of a fault that strikes the whole fleet. Each run arrives once
// a fifth of its buyers have their answer, or leaves without arriving (it
// finished first, or failed). When no run is still on its way, the fault
// strikes once, for the runs still selling, and is healed; each of those
// runs' Disturb then returns the fault's error, and every other run's
// faults.ErrMissed (it is tried again, bigger).
type strikeBoard struct {
	mu      sync.Mutex
	state   []laneState
	selling []<-chan struct{} // a ready run's: closed once all its buyers have their answer
	pending int
	struck  []bool // the runs the fault struck while they were selling

	all      chan struct{} // closed when no run is pending
	done     chan struct{} // closed once the fault struck and was healed, or did not strike
	err      error         // the fault's, once done is closed
	struckAt time.Time     // when it struck (zero if it did not), once done is closed
	hit      int           // how many runs it struck, once done is closed
}

type laneState int

const (
	lanePending laneState = iota
	laneReady
	laneGone
)

func newStrikeBoard(runs int) *strikeBoard {
	b := &strikeBoard{
		state: make([]laneState, runs), selling: make([]<-chan struct{}, runs), struck: make([]bool, runs),
		pending: runs, all: make(chan struct{}), done: make(chan struct{}),
	}
	if runs == 0 {
		close(b.all)
	}
	return b
}

// settle moves run i out of pending.
func (b *strikeBoard) settle(i int, to laneState, selling <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state[i] != lanePending {
		return
	}
	b.state[i], b.selling[i] = to, selling
	if b.pending--; b.pending == 0 {
		close(b.all)
	}
}

// leave is run i ending without waiting for the strike; a no-op once it has arrived.
func (b *strikeBoard) leave(i int) { b.settle(i, laneGone, nil) }

// disturb is run i's Disturb: it arrives at the board after at answers
// and returns once the shared fault has struck and been healed.
func (b *strikeBoard) disturb(i int, at int64) func(context.Context, func() int64, <-chan struct{}) error {
	return func(ctx context.Context, answered func() int64, selling <-chan struct{}) error {
		if err := awaitAnswers(ctx, answered, at, selling); err != nil {
			b.leave(i)
			return err
		}
		b.settle(i, laneReady, selling)
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.struck[i] {
			return faults.ErrMissed
		}
		return b.err
	}
}

// strike waits until no run is pending, then injects fault for the runs
// still selling and heals it.
func (b *strikeBoard) strike(ctx context.Context, fault faults.Fault, t faults.Target) {
	defer close(b.done)
	select {
	case <-b.all:
	case <-ctx.Done():
		b.err = ctx.Err()
		return
	}
	b.mu.Lock()
	var selling []<-chan struct{}
	for i, st := range b.state {
		if st == laneReady && !isClosed(b.selling[i]) {
			b.struck[i] = true
			selling = append(selling, b.selling[i])
		}
	}
	b.mu.Unlock()
	if len(selling) == 0 {
		return
	}
	t.Selling = allClosed(selling)
	b.struckAt, b.hit = time.Now(), len(selling)
	slog.Debug("fault strikes side by side", "fault", fault.Name(), "runs", len(selling))
	injectErr := fault.Inject(ctx, t)
	// Heal even a half-done injection, then report the first error.
	err := errors.Join(injectErr, fault.Heal(context.WithoutCancel(ctx)))
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// allClosed returns a channel closed once every one of cs is.
func allClosed(cs []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		for _, c := range cs {
			<-c
		}
		close(out)
	}()
	return out
}
