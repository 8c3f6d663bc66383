package matrix

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/faults"
)

// countingFault is a stand-in Fault for sharedStrike's logic: it counts its
// injections and heals and remembers whether the runs were selling.
type countingFault struct {
	injects, heals atomic.Int32
	err            error
}

func (*countingFault) Name() string { return "counting" }
func (f *countingFault) Inject(context.Context, faults.Target) error {
	f.injects.Add(1)
	return f.err
}
func (f *countingFault) Heal(context.Context) error { f.heals.Add(1); return nil }

// TestSharedStrike: three runs share one strike. Run 0 arrives and is still
// selling; run 1 finishes before its moment; run 2 arrives but has
// finished selling by the time the last run settles. The fault strikes
// once, for run 0 alone; runs 1 and 2 are told they were missed.
func TestSharedStrike(t *testing.T) {
	ctx := context.Background()
	f := &countingFault{}
	s := newSharedStrike(3)
	go s.inject(ctx, f, faults.Target{})

	var answered [3]atomic.Int64
	selling := [3]chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { errs[i] = s.strikeFor(i, 10)(ctx, answered[i].Load, selling[i]) })
	}
	answered[0].Store(10)
	answered[2].Store(10)
	waitState := func(i int, want runState) {
		for {
			s.mu.Lock()
			st := s.state[i]
			s.mu.Unlock()
			if st == want {
				return
			}
			// Spin on the shared strike's own state: it changes within the
			// strikeFor goroutines' 2 ms ticks.
			runtime.Gosched()
			select {
			case <-s.done:
				t.Fatalf("the shared strike struck before run %d reached state %d", i, want)
			default:
			}
		}
	}
	waitState(0, runReady)
	waitState(2, runReady)
	close(selling[2]) // run 2 finished selling while run 1 was still on its way
	close(selling[1]) // run 1 finishes before its moment: it leaves
	<-s.done
	close(selling[0])
	wg.Wait()

	if n := f.injects.Load(); n != 1 {
		t.Errorf("%d injections, want 1 for the whole round", n)
	}
	if n := f.heals.Load(); n != 1 {
		t.Errorf("%d heals, want 1", n)
	}
	if errs[0] != nil {
		t.Errorf("run 0 (struck while selling): %v, want nil", errs[0])
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(errs[i], faults.ErrMissed) {
			t.Errorf("run %d (not selling when the fault struck): %v, want ErrMissed", i, errs[i])
		}
	}
}

// TestSharedStrikeNobodySelling: when every run leaves before its moment,
// the fault never strikes.
func TestSharedStrikeNobodySelling(t *testing.T) {
	f := &countingFault{}
	s := newSharedStrike(2)
	go s.inject(context.Background(), f, faults.Target{})
	s.leave(0)
	s.leave(1)
	s.leave(1) // leaving twice is harmless
	<-s.done
	if f.injects.Load() != 0 || f.heals.Load() != 0 {
		t.Errorf("%d injections and %d heals with nobody selling, want none", f.injects.Load(), f.heals.Load())
	}
}

// TestSharedStrikeFaultError: the fault's error reaches every run it struck.
func TestSharedStrikeFaultError(t *testing.T) {
	boom := errors.New("boom")
	f := &countingFault{err: boom}
	s := newSharedStrike(1)
	go s.inject(context.Background(), f, faults.Target{})
	var answered atomic.Int64
	answered.Store(1)
	selling := make(chan struct{})
	err := s.strikeFor(0, 1)(context.Background(), answered.Load, selling)
	close(selling)
	if !errors.Is(err, boom) {
		t.Errorf("strikeFor = %v, want the fault's error", err)
	}
	if f.heals.Load() != 1 {
		t.Errorf("%d heals after a failed injection, want 1 (heal even a half-done one)", f.heals.Load())
	}
}

// TestARetryRoundKeepsTheSpread: the spread follows the rounds of every
// applicable cell (twice their delay, at least the floor), and a round of
// the cells that missed, which strikes at once, does not cut it.
func TestARetryRoundKeepsTheSpread(t *testing.T) {
	floor := 6 * time.Second
	for _, c := range []struct {
		name      string
		cur       time.Duration
		delay     time.Duration
		everyCell bool
		want      time.Duration
	}{
		{"every cell, slow to strike", floor, 8400 * time.Millisecond, true, 16800 * time.Millisecond},
		{"every cell, quick to strike", 16800 * time.Millisecond, time.Second, true, floor},
		{"the cells that missed", 16800 * time.Millisecond, 600 * time.Millisecond, false, 16800 * time.Millisecond},
	} {
		if got := nextSpread(floor, c.cur, c.delay, c.everyCell); got != c.want {
			t.Errorf("%s: nextSpread(%v, %v, %v, %v) = %v, want %v", c.name, floor, c.cur, c.delay, c.everyCell, got, c.want)
		}
	}
}
