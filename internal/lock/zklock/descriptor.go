package zklock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"inventory/internal/lock/backend"
	"inventory/internal/lock/zklock/zkserve"
)

// Setting names the ZooKeeper ensemble of the Descriptor's lock:
// comma-separated host:port.
const Setting = "INVENTORY_ZOOKEEPER_SERVERS"

// Descriptor describes zklock to the service: the ZooKeeper recipe on the
// ensemble of Setting, one session per process (its timeout Options.TTL);
// one kind of lock, the plain one; one fencing counter (Backend), the lock
// node's czxid; a throw-away ZooKeeper for the tests and the local fleet
// (zkserve).
var Descriptor = backend.Descriptor{
	Name:    Backend,
	Setting: Setting,
	Check: func(value string) error {
		_, err := servers(value)
		return err
	},
	Fences: []string{Backend},
	Server: &zkserve.Server,
	Open: func(ctx context.Context, c backend.Config) (backend.Lockers, error) {
		s, err := servers(c.Setting)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Setting, err)
		}
		zctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := New(zctx, s, Options{Options: c.Options})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Setting, err)
		}
		return backend.One(Backend, l, func() { _ = l.Close() }), nil
	},
}

// servers reads Setting's value: comma-separated host:port.
func servers(value string) ([]string, error) {
	list := strings.Split(value, ",")
	for i, s := range list {
		list[i] = strings.TrimSpace(s)
		if host, port, err := net.SplitHostPort(list[i]); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("want comma-separated host:port, got %q", value)
		}
	}
	return list, nil
}
