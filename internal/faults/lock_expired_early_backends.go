package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"inventory/internal/fleet"
)

// lockStore is one place a product's lock may live (see LockExpiredEarly).
type lockStore interface {
	name() string
	// holder returns the product's current lock holder, or false when the
	// product's lock is not held here.
	holder(ctx context.Context, product string) (lockHolder, bool, error)
	close()
}

// lockHolder is one holder of a product's lock.
type lockHolder struct {
	// id tells this holder from every other holder of the product's lock.
	id string
	// take ends its hold, only if it still holds the lock; false when it
	// had let go already.
	take func(context.Context) (bool, error)
	// settle is how long it must have been the holder before it is taken:
	// an etcd key or a ZooKeeper node is the oldest before its owner's
	// Lock has seen so and returned, and taken then, that Lock fails
	// instead of a held lease ending.
	settle time.Duration
}

// settle is lockHolder.settle for etcd and ZooKeeper holders: far more
// than a Lock needs to see its key or node is the oldest, far less than a
// critical section under the fleet's load.
const settle = 10 * time.Millisecond

// lockName is the name every lock strategy gives a product's lock (stock's
// lockKey): the Redis key, the etcd key's and ZooKeeper path's last part,
// the locks table's row.
func lockName(product string) string { return "lock:{" + product + "}" }

// Where the etcd and ZooKeeper backends keep a lock named name, with their
// default options (the fleet's). The fault reads and deletes these itself,
// as an operator would, rather than import the backends: the load tester
// that runs it must not compile the service's lock stack. lock_layout_test.go
// holds each against what its backend really writes, so a change to a
// backend's layout fails there, not silently here.
const (
	// etcdLockPrefix is etcdlock.DefaultPrefix: name's keys are
	// etcdLockPrefix+name+"/"+<lease id in hex>, the holder's the one with
	// the lowest create revision.
	etcdLockPrefix = "/inventory/locks/"
	// zkLockRoot is zklock.DefaultRoot: name's lock nodes are the children
	// of zkLockRoot+"/"+name.
	zkLockRoot = "/inventory/locks"
	// zkProtected marks a lock node (Curator's protected node,
	// _c_<guid>-lock-<sequence>); zkSeqDigits is the width of the sequence
	// ZooKeeper appends.
	zkProtected = "_c_"
	zkSeqDigits = 10
)

// zkHolder is the lock node among a lock's children that holds it, the
// lowest sequence (zklock.Holder), or false when none is a lock node.
func zkHolder(children []string) (string, bool) {
	best, bestSeq := "", int64(-1)
	for _, c := range children {
		if len(c) < zkSeqDigits || !strings.HasPrefix(c, zkProtected) {
			continue
		}
		n, err := strconv.ParseInt(c[len(c)-zkSeqDigits:], 10, 64)
		if err != nil {
			continue
		}
		if bestSeq < 0 || n < bestSeq {
			best, bestSeq = c, n
		}
	}
	return best, bestSeq >= 0
}

// openLockStores connects to every place the fleet can keep a lock in.
func openLockStores(ctx context.Context, f *fleet.Fleet) ([]lockStore, error) {
	var stores []lockStore
	fail := func(err error) ([]lockStore, error) {
		closeLockStores(stores)
		return nil, err
	}
	if f.RedisURL != "" {
		s, err := openRedisLocks(f)
		if err != nil {
			return fail(err)
		}
		stores = append(stores, s)
	}
	if f.Etcd != nil {
		s, err := openEtcdLocks(f.Etcd.Endpoint)
		if err != nil {
			return fail(err)
		}
		stores = append(stores, s)
	}
	if f.ZooKeeper != nil {
		s, err := openZKLocks(ctx, f.ZooKeeper.Addr)
		if err != nil {
			return fail(err)
		}
		stores = append(stores, s)
	}
	if f.PostgresURL != "" {
		conn, err := pgx.Connect(ctx, f.PostgresURL)
		if err != nil {
			return fail(fmt.Errorf("connect to postgres: %w", err))
		}
		stores = append(stores, &pgLocks{conn: conn})
	}
	return stores, nil
}

func closeLockStores(stores []lockStore) {
	for _, s := range stores {
		s.close()
	}
}

// redisLocks are the lock keys in the fleet's Redis and on every Redlock
// server.
type redisLocks struct{ rdbs []*redis.Client }

func openRedisLocks(f *fleet.Fleet) (*redisLocks, error) {
	urls := []string{f.RedisURL}
	for _, r := range f.RedlockServers {
		urls = append(urls, r.URL)
	}
	s := &redisLocks{}
	for _, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			s.close()
			return nil, err
		}
		s.rdbs = append(s.rdbs, redis.NewClient(opts))
	}
	return s, nil
}

func (*redisLocks) name() string { return "redis" }

func (s *redisLocks) close() {
	for _, rdb := range s.rdbs {
		_ = rdb.Close()
	}
}

func (s *redisLocks) holder(ctx context.Context, product string) (lockHolder, bool, error) {
	for _, rdb := range s.rdbs {
		key, val, err := redisLockKey(ctx, rdb, product)
		if err != nil {
			return lockHolder{}, false, err
		}
		if key == "" {
			continue
		}
		// Only the holder's own key, so a new holder's is left alone; on
		// every server that has it (a Redlock holder's is on a majority).
		take := func(ctx context.Context) (bool, error) {
			taken := false
			for _, rdb := range s.rdbs {
				n, err := deleteHolder.Run(ctx, rdb, []string{key}, val).Int()
				if err != nil {
					return taken, fmt.Errorf("delete %s on %s: %w", key, rdb.Options().Addr, err)
				}
				taken = taken || n > 0
			}
			return taken, nil
		}
		return lockHolder{id: val, take: take}, true, nil
	}
	return lockHolder{}, false, nil
}

// deleteHolder deletes KEYS[1] if it is still held by ARGV[1]: the value of
// a string lock, or a field (the owner) of a hash lock.
var deleteHolder = redis.NewScript(`
local t = redis.call("TYPE", KEYS[1]).ok
if (t == "string" and redis.call("GET", KEYS[1]) == ARGV[1])
	or (t == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1) then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// redisLockKey finds the product's lock key in Redis, "lock:{id}" or any
// key starting with "lock" and carrying the product's hash tag, except the
// fencing counters (":fence", ":fair:fence", ":redlock-fence"), or setnx's
// "setnx:{id}", and returns it with its holder: a string's value, or a
// hash's first field. It returns "" when there is none. (setnx's value is
// always 1, so its holders look alike: one of them loses its lock per run.)
func redisLockKey(ctx context.Context, rdb *redis.Client, product string) (key, val string, err error) {
	iter := rdb.Scan(ctx, 0, "*{"+product+"}*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !(strings.HasPrefix(k, "lock") || strings.HasPrefix(k, "setnx:")) || strings.HasSuffix(k, "fence") {
			continue
		}
		switch typ, err := rdb.Type(ctx, k).Result(); {
		case err != nil:
			return "", "", err
		case typ == "string":
			v, err := rdb.Get(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			return k, v, err
		case typ == "hash":
			fields, err := rdb.HKeys(ctx, k).Result()
			if err != nil || len(fields) == 0 {
				continue
			}
			return k, fields[0], nil
		}
	}
	return "", "", iter.Err()
}

// etcdLocks are the etcd strategy's keys (etcdLockPrefix).
type etcdLocks struct{ c *clientv3.Client }

func openEtcdLocks(endpoint string) (*etcdLocks, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", endpoint, err)
	}
	return &etcdLocks{c: c}, nil
}

func (*etcdLocks) name() string { return "etcd" }

func (s *etcdLocks) close() { _ = s.c.Close() }

func (s *etcdLocks) holder(ctx context.Context, product string) (lockHolder, bool, error) {
	resp, err := s.c.Get(ctx, etcdLockPrefix+lockName(product)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return lockHolder{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return lockHolder{}, false, nil
	}
	// A replica's keys share its session's name: the create revision tells
	// one acquisition from the next.
	key, rev := string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
	take := func(ctx context.Context) (bool, error) {
		r, err := s.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return false, fmt.Errorf("delete %s: %w", key, err)
		}
		return r.Succeeded, nil
	}
	return lockHolder{id: key + "@" + strconv.FormatInt(rev, 10), take: take, settle: settle}, true, nil
}

// zkLocks are the zookeeper strategy's nodes (under zkLockRoot).
type zkLocks struct{ conn *zk.Conn }

// zkSessionTimeout is the fault's own ZooKeeper session's timeout.
const zkSessionTimeout = 10 * time.Second

func openZKLocks(ctx context.Context, addr string) (*zkLocks, error) {
	conn, events, err := zk.Connect([]string{addr}, zkSessionTimeout, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("connect to ZooKeeper at %s: %w", addr, err)
	}
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session at %s: %w", addr, ctx.Err())
		}
	}
	return &zkLocks{conn: conn}, nil
}

// zkQuiet drops go-zookeeper's log lines: failures reach Inject as errors.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func (*zkLocks) name() string { return "zookeeper" }

func (s *zkLocks) close() { s.conn.Close() }

func (s *zkLocks) holder(_ context.Context, product string) (lockHolder, bool, error) {
	parent := zkLockRoot + "/" + lockName(product)
	children, _, err := s.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return lockHolder{}, false, nil
	}
	if err != nil {
		return lockHolder{}, false, fmt.Errorf("list %s: %w", parent, err)
	}
	node, ok := zkHolder(children)
	if !ok {
		return lockHolder{}, false, nil
	}
	path := parent + "/" + node // unique to one acquisition: sequence and GUID
	take := func(context.Context) (bool, error) {
		switch err := s.conn.Delete(path, -1); {
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("delete %s: %w", path, err)
		}
		return true, nil
	}
	return lockHolder{id: path, take: take, settle: settle}, true, nil
}

// pgLocks are the pglock strategy's rows (the locks table).
type pgLocks struct{ conn *pgx.Conn }

func (*pgLocks) name() string { return "pglock" }

func (s *pgLocks) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.conn.Close(ctx)
}

func (s *pgLocks) holder(ctx context.Context, product string) (lockHolder, bool, error) {
	name := lockName(product)
	var token string
	err := s.conn.QueryRow(ctx, `
		SELECT token FROM locks
		WHERE name = $1 AND token IS NOT NULL AND expires_at > clock_timestamp()`, name).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return lockHolder{}, false, nil
	}
	if err != nil {
		return lockHolder{}, false, fmt.Errorf("read the locks row %s: %w", name, err)
	}
	// Expire, not delete: see LockExpiredEarly.
	take := func(ctx context.Context) (bool, error) {
		tag, err := s.conn.Exec(ctx, `
			UPDATE locks SET expires_at = clock_timestamp()
			WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()`, name, token)
		if err != nil {
			return false, fmt.Errorf("expire the locks row %s: %w", name, err)
		}
		return tag.RowsAffected() == 1, nil
	}
	return lockHolder{id: token, take: take}, true, nil
}
