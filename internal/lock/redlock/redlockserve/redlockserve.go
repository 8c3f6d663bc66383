// Package redlockserve starts the throw-away Redis servers that redlock's
// tests and the local fleet run on (redlock.Descriptor.Server): N
// independent redis-server processes on free loopback ports, as
// internal/localstack starts them. It imports none of redlock, whose own
// tests reach it through internal/testenv.
package redlockserve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"inventory/internal/localstack"
	"inventory/internal/lock/backend"
)

// N is how many servers Server starts: the fewest a Redlock takes.
const N = 3

// Server is redlock's: N independent redis-servers without persistence
// (ServerOptions.Durable changes nothing), whose redis:// URLs, comma-
// separated, are the setting; with ServerOptions.FakeClock the first runs
// under libfaketime. Each test binary starts its own: redlock's tests
// empty them.
var Server = backend.Server{Start: start, Needs: []string{"redis-server"}}

func start(ctx context.Context, o backend.ServerOptions) (backend.Servers, error) {
	s := servers{redis: make([]*localstack.Redis, N)}
	errs := make([]error, N)
	var wg sync.WaitGroup
	for i := range s.redis {
		opts := localstack.RedisOptions{FakeClock: o.FakeClock && i == 0}
		wg.Go(func() { s.redis[i], errs[i] = localstack.StartRedisWith(ctx, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

type servers struct{ redis []*localstack.Redis }

func (s servers) Setting() string {
	urls := make([]string, len(s.redis))
	for i, r := range s.redis {
		urls[i] = r.URL
	}
	return strings.Join(urls, ",")
}

func (s servers) Logs() map[string]func() string {
	logs := map[string]func() string{}
	for i, r := range s.redis {
		logs[fmt.Sprintf("redlock-%d.log", i+1)] = r.Logs
	}
	return logs
}

// RedisServers are the servers, the first the one with the fake clock, for
// the faults that restart a Redis or move its clock (fleet.RedlockServers).
func (s servers) RedisServers() []*localstack.Redis { return s.redis }

func (s servers) Stop() error {
	var errs []error
	for _, r := range s.redis {
		if r != nil {
			errs = append(errs, r.Stop())
		}
	}
	return errors.Join(errs...)
}
