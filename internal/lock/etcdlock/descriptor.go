package etcdlock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"inventory/internal/lock/backend"
	"inventory/internal/lock/etcdlock/etcdserve"
)

// Setting names the etcd of the Descriptor's lock: comma-separated
// host:port client endpoints.
const Setting = "INVENTORY_ETCD_ENDPOINTS"

// Descriptor describes etcdlock to the service: a lock held in the etcd of
// Setting, on one session per process (its lease, Options.TTL); one kind
// of lock, the plain one; one fencing counter (Backend), the lock key's
// create revision, which etcd never hands out twice while it keeps its data;
// a throw-away etcd for the tests and the local fleet (etcdserve).
var Descriptor = backend.Descriptor{
	Name:    Backend,
	Setting: Setting,
	Check: func(value string) error {
		_, err := endpoints(value)
		return err
	},
	Fences: []string{Backend},
	Server: &etcdserve.Server,
	Open: func(ctx context.Context, c backend.Config) (backend.Lockers, error) {
		eps, err := endpoints(c.Setting)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Setting, err)
		}
		l, err := dialWaiting(ctx, eps, Options{Options: c.Options}, c)
		if err != nil {
			return nil, err
		}
		return backend.One(Backend, l, func() { _ = l.Close() }), nil
	},
}

// endpoints reads Setting's value: comma-separated host:port.
func endpoints(value string) ([]string, error) {
	var eps []string
	for ep := range strings.SplitSeq(value, ",") {
		if ep = strings.TrimSpace(ep); ep == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return nil, fmt.Errorf("want comma-separated host:port, got %q", value)
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// dialWaiting dials etcd, waiting up to 30 s for it to come up, as the
// service waits for Postgres and Redis at start.
func dialWaiting(ctx context.Context, eps []string, opts Options, c backend.Config) (*Locker, error) {
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		l, err := Dial(waitCtx, eps, opts)
		if err == nil {
			return l, nil
		}
		c.Logger().Warn("waiting for etcd", "etcd_err", err)
		select {
		case <-waitCtx.Done():
			return nil, fmt.Errorf("%s: etcd not reachable: %w", Setting, err)
		case <-time.After(delay):
		}
	}
}
