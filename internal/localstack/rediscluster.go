package localstack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterOptions are StartRedisCluster's settings; the zero value is
// three masters with one replica each.
type RedisClusterOptions struct {
	// Masters is how many masters share the 16384 slots; default 3, the
	// fewest Redis Cluster accepts.
	Masters int
	// Replicas is how many replicas each master has; default 1. A master
	// without one leaves its slots down when it dies.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// silent before its replica stands for election; default 2s.
	NodeTimeout time.Duration
}

// RedisCluster is a throw-away Redis Cluster on loopback: Masters nodes
// holding the slots in equal ranges, each with its Replicas, every node a
// Redis of its own (Restart it and it rejoins, with its nodes.conf).
type RedisCluster struct {
	// Nodes are the masters as started, then their replicas; after a
	// failover a node's role is what MasterOf and Role say, not its place.
	Nodes []*Redis

	opts RedisClusterOptions
}

// StartRedisCluster starts the nodes, gives the masters their slots,
// introduces the nodes to each other and makes the replicas replicate,
// and returns once every node reports the cluster ok and every replica is
// in sync with its master.
func StartRedisCluster(ctx context.Context, o RedisClusterOptions) (*RedisCluster, error) {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 2 * time.Second
	}
	if o.Masters < 3 || o.Replicas < 0 {
		return nil, fmt.Errorf("redis cluster: %d masters with %d replicas each: want 3 masters or more", o.Masters, o.Replicas)
	}
	n := o.Masters * (1 + o.Replicas)
	c := &RedisCluster{Nodes: make([]*Redis, n), opts: o}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Go(func() {
			c.Nodes[i], errs[i] = StartRedisWith(ctx, RedisOptions{ClusterNodeTimeout: o.NodeTimeout})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("redis cluster: %w", err)
	}
	if err := c.assemble(ctx); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("redis cluster: %w", err)
	}
	return c, nil
}

// assemble does what redis-cli --cluster create does, without needing
// redis-cli: slots, config epochs, MEET, REPLICATE.
func (c *RedisCluster) assemble(ctx context.Context) error {
	m := c.opts.Masters
	ids := make([]string, len(c.Nodes))
	for i, r := range c.Nodes {
		rc := nodeClient(r.Addr)
		id, err := rc.ClusterMyID(ctx).Result()
		if err == nil && i < m {
			lo, hi := i*16384/m, (i+1)*16384/m-1
			err = rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
			if err == nil {
				// Distinct epochs up front spare the cluster resolving
				// their collision after the MEETs.
				err = rc.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
			}
		}
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", r.Addr, err)
		}
		ids[i] = id
	}
	first := nodeClient(c.Nodes[0].Addr)
	defer first.Close()
	for _, r := range c.Nodes[1:] {
		host, port, _ := splitHostPort(r.Addr)
		// The bus port is named: it is not port+10000 (see Redis.busPort).
		if err := first.Do(ctx, "CLUSTER", "MEET", host, strconv.Itoa(port), strconv.Itoa(r.busPort)).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", r.Addr, err)
		}
	}
	for _, r := range c.Nodes {
		if err := poll(ctx, 15*time.Second, nil, func(ctx context.Context) error { return knowsAll(ctx, r.Addr, len(c.Nodes)) }); err != nil {
			return err
		}
	}
	for i, r := range c.Nodes[m:] {
		rc := nodeClient(r.Addr)
		err := rc.ClusterReplicate(ctx, ids[i%m]).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("node %s: CLUSTER REPLICATE %s: %w", r.Addr, c.Nodes[i%m].Addr, err)
		}
	}
	return c.WaitHealthy(ctx, 30*time.Second)
}

// Seeds are the nodes' host:port, to give a cluster client (any one would
// do: the client learns the rest from it).
func (c *RedisCluster) Seeds() []string {
	addrs := make([]string, len(c.Nodes))
	for i, r := range c.Nodes {
		addrs[i] = r.Addr
	}
	return addrs
}

// MasterOf returns the node that is master of key's slot now, as the
// first node that answers sees it.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (*Redis, error) {
	var last error
	for _, r := range c.Nodes {
		rc := nodeClient(r.Addr)
		addr, err := slotMaster(ctx, rc, key)
		_ = rc.Close()
		if err != nil {
			last = err
			continue
		}
		for _, n := range c.Nodes {
			if n.Addr == addr {
				return n, nil
			}
		}
		return nil, fmt.Errorf("redis cluster: %s names %s master of %q, not one of its nodes", r.Addr, addr, key)
	}
	return nil, fmt.Errorf("redis cluster: no node says which is master of %q: %w", key, last)
}

func slotMaster(ctx context.Context, rc *redis.Client, key string) (string, error) {
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	slots, err := rc.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d of %q has no master", slot, key)
}

// WaitHealthy waits up to timeout until every node answers, reports the
// cluster ok with every slot served, sees no node failing, and every
// replica is in sync with its master; a node just restarted has then
// rejoined.
func (c *RedisCluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, nil, func(ctx context.Context) error {
		masters := 0
		for _, r := range c.Nodes {
			master, err := nodeHealthy(ctx, r.Addr, len(c.Nodes))
			if err != nil {
				return err
			}
			if master {
				masters++
			}
		}
		if masters != c.opts.Masters {
			return fmt.Errorf("%d masters, want %d", masters, c.opts.Masters)
		}
		return nil
	})
}

// nodeHealthy checks one node for WaitHealthy and reports whether it is a
// master.
func nodeHealthy(ctx context.Context, addr string, nodes int) (master bool, err error) {
	rc := nodeClient(addr)
	defer rc.Close()
	info, err := rc.ClusterInfo(ctx).Result()
	if err != nil {
		return false, fmt.Errorf("node %s: %w", addr, err)
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(nodes)} {
		if !strings.Contains(info, want+"\r\n") {
			return false, fmt.Errorf("node %s: CLUSTER INFO lacks %s:\n%s", addr, want, info)
		}
	}
	if err := knowsAll(ctx, addr, nodes); err != nil {
		return false, err
	}
	repl, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return false, fmt.Errorf("node %s: %w", addr, err)
	}
	if strings.Contains(repl, "role:master") {
		return true, nil
	}
	if !strings.Contains(repl, "master_link_status:up") || strings.Contains(repl, "master_sync_in_progress:1") {
		return false, fmt.Errorf("node %s: replica not in sync:\n%s", addr, repl)
	}
	return false, nil
}

// knowsAll answers nil once the node at addr knows nodes nodes, none of
// them in handshake or flagged failing.
func knowsAll(ctx context.Context, addr string, nodes int) error {
	rc := nodeClient(addr)
	defer rc.Close()
	out, err := rc.ClusterNodes(ctx).Result()
	if err != nil {
		return fmt.Errorf("node %s: %w", addr, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != nodes {
		return fmt.Errorf("node %s knows %d nodes, want %d:\n%s", addr, len(lines), nodes, out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) < 3 || strings.Contains(f[2], "handshake") || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") {
			return fmt.Errorf("node %s: not settled: %s", addr, l)
		}
	}
	return nil
}

// Stop stops every node.
func (c *RedisCluster) Stop() error {
	var errs []error
	for _, r := range c.Nodes {
		if r != nil {
			errs = append(errs, r.Stop())
		}
	}
	return errors.Join(errs...)
}

// nodeClient talks to one node itself, not the cluster: no redirects, no
// retries.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
}

// ReplicaOf returns a node that replicates master now, as it reports
// itself (INFO replication), or an error if none does.
func (c *RedisCluster) ReplicaOf(ctx context.Context, master *Redis) (*Redis, error) {
	for _, r := range c.Nodes {
		if r == master {
			continue
		}
		rc := nodeClient(r.Addr)
		info, err := rc.Info(ctx, "replication").Result()
		_ = rc.Close()
		if err != nil {
			continue
		}
		host, port, _ := splitHostPort(master.Addr)
		if strings.Contains(info, "role:slave\r\n") && strings.Contains(info, "master_host:"+host+"\r\n") && strings.Contains(info, "master_port:"+strconv.Itoa(port)+"\r\n") {
			return r, nil
		}
	}
	return nil, fmt.Errorf("redis cluster: no node replicates %s", master.Addr)
}
