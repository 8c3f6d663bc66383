package redlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock/backend"
	"inventory/internal/lock/redlock/redlockserve"
)

// Setting names the independent Redis servers of the Descriptor's lock:
// comma-separated redis:// URLs, three or more.
const Setting = "INVENTORY_REDLOCK_URLS"

// Descriptor describes redlock to the service: a Redlock over the
// independent Redis servers of Setting (never the service's own Redis,
// nor the masters of one Redis Cluster); one kind of lock, the plain one;
// one fencing counter (Backend), kept on a majority of the servers and
// restarted above what Postgres has seen (Config.FenceFloor); throw-away
// servers for the tests and the local fleet (redlockserve).
var Descriptor = backend.Descriptor{
	Name:    Backend,
	Setting: Setting,
	Secret:  true, // the URLs may carry passwords
	Check: func(value string) error {
		_, err := parseURLs(value)
		return err
	},
	Fences: []string{Backend},
	Server: &redlockserve.Server,
	Open: func(_ context.Context, c backend.Config) (backend.Lockers, error) {
		all, err := parseURLs(c.Setting)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Setting, err)
		}
		servers := make([]redis.UniversalClient, len(all))
		for i, opts := range all {
			opts.ContextTimeoutEnabled = true // the per-server timeouts (Options.ServerTimeout)
			servers[i] = redis.NewClient(opts)
		}
		l := New(servers, Options{Options: c.Options, FenceFloor: c.Floor(Backend)})
		return backend.One(Backend, l, func() {
			for _, s := range servers {
				_ = s.Close()
			}
		}), nil
	},
}

// parseURLs reads Setting's value: 3 or more comma-separated redis:// URLs.
func parseURLs(value string) ([]*redis.Options, error) {
	urls := strings.Split(value, ",")
	if len(urls) < 3 {
		return nil, fmt.Errorf("want 3 or more comma-separated redis:// URLs of independent servers, got %d", len(urls))
	}
	all := make([]*redis.Options, len(urls))
	for i, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		all[i] = opts
	}
	return all, nil
}
