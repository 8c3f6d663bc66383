package main

import (
	"context"
	"fmt"
	"log/slog"
)

// redisLogger hands go-redis's own messages (a dial that failed, a
// connection the pool dropped) to the service's log as warnings, so that
// they come out as JSON lines like every other line instead of as raw text
// on stderr.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
