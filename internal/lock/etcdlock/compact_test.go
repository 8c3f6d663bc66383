package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// compactPast writes a few keys of the test's own (so that revisions exist
// past every lock key there is) and compacts etcd's history up to the
// newest revision: a watch that starts at an older one is then refused
// with "required revision has been compacted".
func compactPast(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	var rev int64
	for i := range 3 {
		resp, err := c.Put(ctx, fmt.Sprintf("%sfiller/%d", prefix(t), i), "x")
		if err != nil {
			t.Fatalf("put filler: %v", err)
		}
		rev = resp.Header.Revision
	}
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact to %d: %v", rev, err)
	}
	t.Logf("compacted to revision %d", rev)
}

// lockAsync runs l.Lock in a goroutine; the channel gets its result.
func lockAsync(ctx context.Context, l *Locker, name string) <-chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		lease, err := l.Lock(ctx, name)
		got <- lockResult{lease, err}
	}()
	return got
}

type lockResult struct {
	lease lock.Lease
	err   error
}

// notLostAfterCompaction checks that lease, granted after etcd compacted
// past its key's creation, stays valid, and that its watch on its key
// still works: deleting the key by hand loses it with ErrKeyDeleted.
func notLostAfterCompaction(t *testing.T, c *clientv3.Client, lease lock.Lease) {
	t.Helper()
	// The loss this guards against comes within milliseconds of the grant
	// (the watch on the key is refused at once); a second is ample.
	if took, lost := waitDone(lease.Context(), time.Second); lost {
		t.Fatalf("lease lost %v after it was granted: %v", took, context.Cause(lease.Context()))
	}
	if _, err := c.Delete(context.Background(), lease.(*Lease).EtcdKey()); err != nil {
		t.Fatalf("delete the holder's key: %v", err)
	}
	if _, lost := waitDone(lease.Context(), 5*time.Second); !lost {
		t.Fatal("lease not lost 5s after its key was deleted: its key is no longer watched")
	}
	if err := lease.Err(); !errors.Is(err, ErrKeyDeleted) || errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("Err() after the key's deletion = %v, want ErrKeyDeleted (and not a refused watch)", err)
	}
}

// TestCompactionWhileWaiting: etcd compacts its history past a waiter's
// key while the waiter waits (production etcd compacts every few minutes
// or revisions). When the holder releases, the waiter gets the lock, and
// its lease is not reported lost: a watch refused for a compacted revision
// says nothing about the key, which is read again and watched from a
// revision that exists. The fence is still the key's create revision.
func TestCompactionWhileWaiting(t *testing.T) {
	srv := testenv.EtcdServer(t) // compaction is etcd-wide: not on the shared one
	eps := []string{srv.Endpoint}
	leakCheck(t)
	c := newClient(t, eps)
	a, b := newLocker(t, eps, Options{}), newLocker(t, eps, Options{})
	ctx := context.Background()
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	got := lockAsync(ctx, b, "k")
	testenv.WaitFor(t, "B's key", 5*time.Second, func() bool { return len(keys(t, c, "k")) == 2 })
	compactPast(t, c)
	if err := held.Release(ctx); err != nil {
		t.Fatalf("A: Release = %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("B: Lock after the compaction and A's release = %v", r.err)
	}
	if r.lease.Fence().Token <= held.Fence().Token {
		t.Errorf("B's fence %d not above A's %d", r.lease.Fence().Token, held.Fence().Token)
	}
	notLostAfterCompaction(t, c, r.lease)
	_ = r.lease.Release(ctx)
}

// TestCompactionWithTwoPredecessors: C waits behind B, which waits behind
// holder A. After a compaction past C's key, B gives up; C must go on
// waiting (now for A) rather than fail, and get the lock when A releases.
func TestCompactionWithTwoPredecessors(t *testing.T) {
	srv := testenv.EtcdServer(t)
	eps := []string{srv.Endpoint}
	leakCheck(t)
	cl := newClient(t, eps)
	opts := Options{Options: lock.Options{Wait: 20 * time.Second}}
	a, b, c := newLocker(t, eps, opts), newLocker(t, eps, opts), newLocker(t, eps, opts)
	ctx := context.Background()
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	bctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	bGot := lockAsync(bctx, b, "k")
	testenv.WaitFor(t, "B's key", 5*time.Second, func() bool { return len(keys(t, cl, "k")) == 2 })
	cGot := lockAsync(ctx, c, "k")
	testenv.WaitFor(t, "C's key", 5*time.Second, func() bool { return len(keys(t, cl, "k")) == 3 })
	compactPast(t, cl)
	giveUp()
	if r := <-bGot; !errors.Is(r.err, lock.ErrTimeout) {
		t.Fatalf("B: Lock cancelled = %v, want lock.ErrTimeout", r.err)
	}
	testenv.WaitFor(t, "B's key gone", 5*time.Second, func() bool { return len(keys(t, cl, "k")) == 2 })
	select {
	case r := <-cGot:
		t.Fatalf("C: Lock returned while A still holds: %v", r.err)
	default:
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("A: Release = %v", err)
	}
	r := <-cGot
	if r.err != nil {
		t.Fatalf("C: Lock after B gave up and A released = %v", r.err)
	}
	notLostAfterCompaction(t, cl, r.lease)
	_ = r.lease.Release(ctx)
}
