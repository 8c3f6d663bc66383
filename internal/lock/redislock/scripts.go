package redislock

import (
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock/internal/redisscript"
)

// Every script is safe to re-send: go-redis retries a command whose reply was
// lost (MaxRetries, default 3), so each one recognises its own earlier effect
// (by token or operation id) instead of applying it twice.
var (
	//go:embed mutex_renew.lua
	mutexRenewSrc string
	//go:embed reentrant_acquire.lua
	reentrantAcquireBody string
	//go:embed reentrant_enter.lua
	reentrantEnterSrc string
	//go:embed reentrant_renew.lua
	reentrantRenewSrc string
	//go:embed reentrant_release.lua
	reentrantReleaseSrc string
	//go:embed fair_acquire.lua
	fairAcquireBody string
	//go:embed fair_release.lua
	fairReleaseSrc string

	// The acquire scripts mint fences with redisscript's mint_fence.
	reentrantAcquireSrc = redisscript.WithFence(reentrantAcquireBody)
	fairAcquireSrc      = redisscript.WithFence(fairAcquireBody)

	// A Mutex is the one-server lock redlock also takes on each of its
	// servers.
	mutexAcquireSrc    = redisscript.AcquireSrc
	mutexAcquire       = redisscript.Acquire
	mutexRenew         = redis.NewScript(mutexRenewSrc)
	mutexRelease       = redisscript.Release
	reentrantAcquire   = redis.NewScript(reentrantAcquireSrc)
	reentrantEnter     = redis.NewScript(reentrantEnterSrc)
	reentrantRenew     = redis.NewScript(reentrantRenewSrc)
	reentrantRelease   = redis.NewScript(reentrantReleaseSrc)
	fairAcquire        = redis.NewScript(fairAcquireSrc)
	fairRelease        = redis.NewScript(fairReleaseSrc)
	errUnexpectedReply = errors.New("unexpected script reply")
)

// replyInts reads a script reply that is an integer or an array of integers.
func replyInts(v any) ([]int64, error) {
	switch r := v.(type) {
	case int64:
		return []int64{r}, nil
	case []any:
		out := make([]int64, len(r))
		for i, e := range r {
			n, ok := e.(int64)
			if !ok {
				return nil, fmt.Errorf("%w: %v", errUnexpectedReply, v)
			}
			out[i] = n
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: empty", errUnexpectedReply)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %v", errUnexpectedReply, v)
}

// isServerReply reports whether err is an error reply from Redis, i.e. the
// command ran (or was refused) and its outcome is known, as opposed to a
// network or context error after which it may or may not have run.
func isServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
