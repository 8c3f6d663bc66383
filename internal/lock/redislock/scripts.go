package redislock

import (
	_ "embed"

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
	fairReleaseBody string
	//go:embed fair_expire.lua
	fairExpireSrc string

	// The acquire scripts mint fences with redisscript's mint_fence; the
	// Fair scripts start by dropping expired waiters (fair_expire.lua).
	reentrantAcquireSrc = redisscript.WithFence(reentrantAcquireBody)
	fairAcquireSrc      = redisscript.WithFence(fairExpireSrc + fairAcquireBody)
	fairReleaseSrc      = fairExpireSrc + fairReleaseBody

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
	errUnexpectedReply = redisscript.ErrUnexpectedReply
)
