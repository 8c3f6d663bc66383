// Package etcdbreak is etcdlock's Breaker (package breaker): it finds a
// product's lock in etcd (INVENTORY_ETCD_ENDPOINTS) and deletes the
// holder's key, only if it still has the holder's create revision: what
// etcd does to it when its lease expires. The holder's watch cancels its
// lease, and the next waiter takes over.
package etcdbreak

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"inventory/internal/lock/breaker"
)

// Where etcdlock keeps a lock named name, with its default options (the
// service's); faults' TestLockLayoutAgreesWithTheBackends holds them
// against what etcdlock writes.
const (
	// Setting is etcdlock.Setting.
	Setting = "INVENTORY_ETCD_ENDPOINTS"
	// Prefix is etcdlock.DefaultPrefix: name's keys are
	// Prefix+name+"/"+<lease id in hex>, the holder's the one with the
	// lowest create revision.
	Prefix = "/inventory/locks/"
)

// settle is Holder.Settle for etcd holders: far more than a Lock needs to
// see its key is the oldest, far less than a critical section under load.
const settle = 10 * time.Millisecond

// Breaker is etcdlock's.
var Breaker = breaker.Breaker{
	Backend: "etcdlock",
	Where:   "etcd",
	Open: func(_ context.Context, s breaker.Servers) (breaker.Locks, bool, error) {
		var eps []string
		for ep := range strings.SplitSeq(s.Settings[Setting], ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				eps = append(eps, ep)
			}
		}
		if len(eps) == 0 {
			return nil, false, nil
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, false, fmt.Errorf("connect to etcd at %v: %w", eps, err)
		}
		return locks{c}, true, nil
	},
}

type locks struct{ c *clientv3.Client }

func (l locks) Close() { _ = l.c.Close() }

func (l locks) Holder(ctx context.Context, name string) (breaker.Holder, bool, error) {
	resp, err := l.c.Get(ctx, Prefix+name+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return breaker.Holder{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return breaker.Holder{}, false, nil
	}
	// A replica's keys share its session's name: the create revision tells
	// one acquisition from the next.
	key, rev := string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
	take := func(ctx context.Context) (bool, error) {
		r, err := l.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return false, fmt.Errorf("delete %s: %w", key, err)
		}
		return r.Succeeded, nil
	}
	return breaker.Holder{ID: key + "@" + strconv.FormatInt(rev, 10), Take: take, Settle: settle}, true, nil
}
