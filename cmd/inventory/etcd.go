package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"inventory/internal/lock"
	"inventory/internal/lock/etcdlock"
)

// dialEtcd connects the etcd strategy's Locker, waiting a while for etcd to
// come up, as connect does for Postgres and Redis.
func dialEtcd(ctx context.Context, eps []string, cfg config, obs lock.Observer, log *slog.Logger) (*etcdlock.Locker, error) {
	opts := etcdlock.Options{Options: lock.Options{TTL: cfg.LockTTL, Wait: cfg.LockWait, Observer: obs}}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		l, err := etcdlock.Dial(waitCtx, eps, opts)
		if err == nil {
			return l, nil
		}
		log.Warn("waiting for etcd", "etcd_err", err)
		select {
		case <-waitCtx.Done():
			return nil, fmt.Errorf("INVENTORY_ETCD_ENDPOINTS: etcd not reachable: %w", err)
		case <-time.After(delay):
		}
	}
}
