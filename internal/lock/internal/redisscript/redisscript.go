// Package redisscript is what the Redis lock backends share: the lock on
// one server, whose acquire and release scripts redislock's Mutex runs on
// its one server and redlock on each of its N; the fence counter every
// acquire script mints from; running a script and reading its reply.
package redisscript

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed fence.lua
	fenceSrc string
	//go:embed acquire.lua
	acquireBody string
	//go:embed release.lua
	releaseSrc string

	// AcquireSrc is Acquire's source.
	AcquireSrc = WithFence(acquireBody)

	// Acquire takes the lock on one server, minting its fence (see acquire.lua).
	Acquire = redis.NewScript(AcquireSrc)
	// Release frees it by token, announcing it on a channel if given (see release.lua).
	Release = redis.NewScript(releaseSrc)
)

// WithFence is script src after the Lua functions it calls to mint a
// fencing token, mint_fence(hash, floor), and to take a key with one,
// set_fenced(key, hash, token, ttl, floor) (fence.lua).
func WithFence(src string) string { return fenceSrc + src }

// Run runs s by its digest and falls back to sending the source when Redis
// does not have it cached (first use, or after a restart). It returns the
// reply and the round trips it took.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, args ...any) (any, int, error) {
	v, err := s.EvalSha(ctx, rdb, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = s.Eval(ctx, rdb, keys, args...).Result()
		return v, 2, err
	}
	return v, 1, err
}

// ErrUnexpectedReply: a script's reply is not what it is written to answer.
var ErrUnexpectedReply = errors.New("unexpected script reply")

// ReplyInts reads a script reply that is an integer or a non-empty array
// of integers.
func ReplyInts(v any) ([]int64, error) {
	switch r := v.(type) {
	case int64:
		return []int64{r}, nil
	case []any:
		out := make([]int64, len(r))
		for i, e := range r {
			n, ok := e.(int64)
			if !ok {
				return nil, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
			}
			out[i] = n
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: empty", ErrUnexpectedReply)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
}

// IsServerReply reports whether err is an error reply from Redis, i.e. the
// command ran (or was refused) and its outcome is known, as opposed to a
// network or context error after which it may or may not have run.
func IsServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
