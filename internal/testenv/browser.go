package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium for t (stopped at its end) and
// returns a context to drive it with chromedp, bounded by limit, and a
// function returning every console error, warning and exception the pages
// have logged so far. A test fails, saying how to install it, when
// Chromium is missing.
func Browser(t testing.TB, limit time.Duration) (ctx context.Context, problems func() []string) {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: %v (make deps installs Debian's chromium)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, limit)
	t.Cleanup(cancelTimeout)

	// Every console message from the page: the target exists first, and
	// Console subscribes when it returns, before any page is loaded.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	var (
		mu   sync.Mutex
		seen []string
	)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.Type == chromedp.ConsoleWarning || msg.Type == chromedp.ConsoleException {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%s: %s", msg.Type, msg.Text))
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
