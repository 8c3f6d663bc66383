package matrix

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"inventory/internal/faults"
)

// sharedStrike is one injection of a fault that strikes the whole fleet,
// shared by the side-by-side runs of one round. Each run arrives once a
// fifth of its buyers have their answer, or leaves without arriving (it
// finished first, or failed). When no run is still on its way, the fault
// strikes once, for the runs still selling, and is healed; each of those
// runs' Strike then returns the fault's error, and every other run's
// faults.ErrMissed (it is tried again, bigger).
type sharedStrike struct {
	mu      sync.Mutex
	state   []runState
	selling []<-chan struct{} // a ready run's: closed once all its buyers have their answer
	pending int
	struck  []bool // the runs the fault struck while they were selling

	all      chan struct{} // closed when no run is pending
	done     chan struct{} // closed once the fault struck and was healed, or did not strike
	err      error         // the fault's, once done is closed
	struckAt time.Time     // when it struck (zero if it did not), once done is closed
	hit      int           // how many runs it struck, once done is closed
}

type runState int

const (
	runPending runState = iota
	runReady
	runGone
)

func newSharedStrike(runs int) *sharedStrike {
	s := &sharedStrike{
		state: make([]runState, runs), selling: make([]<-chan struct{}, runs), struck: make([]bool, runs),
		pending: runs, all: make(chan struct{}), done: make(chan struct{}),
	}
	if runs == 0 {
		close(s.all)
	}
	return s
}

// settle moves run i out of pending.
func (s *sharedStrike) settle(i int, to runState, selling <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[i] != runPending {
		return
	}
	s.state[i], s.selling[i] = to, selling
	if s.pending--; s.pending == 0 {
		close(s.all)
	}
}

// leave is run i ending without waiting for the strike; a no-op once it has arrived.
func (s *sharedStrike) leave(i int) { s.settle(i, runGone, nil) }

// strikeFor is run i's Strike (load.Config.Strike): it arrives after at
// answers and returns once the shared fault has struck and been healed.
func (s *sharedStrike) strikeFor(i int, at int64) func(context.Context, func() int64, <-chan struct{}) error {
	return func(ctx context.Context, answered func() int64, selling <-chan struct{}) error {
		if err := awaitAnswers(ctx, answered, at, selling); err != nil {
			s.leave(i)
			return err
		}
		s.settle(i, runReady, selling)
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.struck[i] {
			return faults.ErrMissed
		}
		return s.err
	}
}

// inject waits until no run is pending, then injects fault for the runs
// still selling and heals it.
func (s *sharedStrike) inject(ctx context.Context, fault faults.Fault, t faults.Target) {
	defer close(s.done)
	select {
	case <-s.all:
	case <-ctx.Done():
		s.err = ctx.Err()
		return
	}
	s.mu.Lock()
	var selling []<-chan struct{}
	for i, st := range s.state {
		if st == runReady && !isClosed(s.selling[i]) {
			s.struck[i] = true
			selling = append(selling, s.selling[i])
		}
	}
	s.mu.Unlock()
	if len(selling) == 0 {
		return
	}
	t.Selling = allClosed(selling)
	s.struckAt, s.hit = time.Now(), len(selling)
	slog.Debug("fault strikes side by side", "fault", fault.Name(), "runs", len(selling))
	injectErr := fault.Inject(ctx, t)
	// Heal even a half-done injection, then report the first error.
	err := errors.Join(injectErr, fault.Heal(context.WithoutCancel(ctx)))
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
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
