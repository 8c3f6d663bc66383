package lock

import (
	"context"
	"sync"
	"time"
)

// CleanupWait is how long a Lock or TryLock whose acquire had an unknown
// outcome waits for the cleanup it starts (the release of whatever the
// acquire may have taken) before it answers, never past its wait budget:
// the cleanup goes on in the background, and a backend that does not
// answer must not stretch the answer past the budget.
const CleanupWait = 100 * time.Millisecond

// Cleanups runs the cleanups that may outlive the calls that needed them;
// a Locker's Close waits for them. The zero value is ready to use.
type Cleanups struct{ wg sync.WaitGroup }

// Run runs f in the background and waits for it as AwaitCleanup does.
func (c *Cleanups) Run(wctx context.Context, f func()) {
	finished := make(chan struct{})
	c.wg.Go(func() {
		defer close(finished)
		f()
	})
	AwaitCleanup(wctx, finished)
}

// Wait waits for every cleanup still running.
func (c *Cleanups) Wait() { c.wg.Wait() }

// AwaitCleanup waits until finished is closed (the cleanup ended), wctx
// ends (the caller's budget) or CleanupWait has passed.
func AwaitCleanup(wctx context.Context, finished <-chan struct{}) {
	t := time.NewTimer(CleanupWait)
	defer t.Stop()
	select {
	case <-finished:
	case <-wctx.Done():
	case <-t.C:
	}
}
