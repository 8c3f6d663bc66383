package localstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a throw-away redis-server without persistence: a restart loses
// every key, which is exactly the "Redis lost its data" fault.
type Redis struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// URL is Addr as a redis:// URL for database 0.
	URL string

	bin, dir string
	port     int
	mu       sync.Mutex
	proc     *Process
	primary  string // host:port this server replicates, "" for none
	// clockFile is libfaketime's timestamp file when the server runs under
	// it (RedisOptions.FakeClock), else ""; preload the libraries it needs.
	clockFile, preload string
	// clusterTimeout is cluster-node-timeout for a Redis Cluster node
	// (StartRedisCluster), 0 for a server on its own.
	clusterTimeout time.Duration
	// busPort is a cluster node's cluster bus port, free when picked (by
	// default Redis takes port+10000, which nothing checked was free).
	busPort int
}

// RedisOptions are StartRedisWith's settings; the zero value is StartRedis.
type RedisOptions struct {
	// FakeClock runs redis-server under libfaketime (Debian's faketime and
	// libfaketime, installed if missing), so that SetClock can move its
	// wall clock while it runs: Redis expires keys by the wall clock, so a
	// jump forward expires a lock early (the clock-jump fault). Default
	// false: the real clock, and nothing preloaded.
	FakeClock bool
	// ClusterNodeTimeout, when not 0, starts the server as a Redis Cluster
	// node (cluster-enabled, its nodes.conf kept across Restart) with this
	// cluster-node-timeout; StartRedisCluster joins such nodes into a
	// cluster. Default 0: a server on its own.
	ClusterNodeTimeout time.Duration
}

// StartRedis starts redis-server on a free loopback port in a fresh temporary
// directory that Stop removes.
func StartRedis(ctx context.Context) (*Redis, error) {
	return StartRedisWith(ctx, RedisOptions{})
}

// StartRedisWith is StartRedis with options.
func StartRedisWith(ctx context.Context, o RedisOptions) (*Redis, error) {
	paths, err := Ensure(ctx, "redis-server")
	if err != nil {
		return nil, err
	}
	var preload string
	if o.FakeClock {
		if preload, err = fakeClockLibs(ctx); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "inventory-redis-")
	if err != nil {
		return nil, fmt.Errorf("redis dir: %w", err)
	}
	var r *Redis
	err = OnFreePorts(func() error {
		n := 1
		if o.ClusterNodeTimeout > 0 {
			n = 2 // and a cluster bus port
		}
		ports, err := freePorts(n)
		if err != nil {
			return err
		}
		port, busPort := ports[0], 0
		if n == 2 {
			busPort = ports[1]
		}
		r = &Redis{
			Addr: hostPort(port),
			URL:  "redis://" + hostPort(port) + "/0",
			bin:  paths[0],
			dir:  dir,
			port: port,

			clusterTimeout: o.ClusterNodeTimeout,
			busPort:        busPort,
		}
		if o.FakeClock {
			r.preload = preload
			r.clockFile = filepath.Join(dir, "faketime.rc")
			if err := writeClock(r.clockFile, 0); err != nil {
				return err
			}
		}
		return r.launch(ctx)
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

func (r *Redis) launch(ctx context.Context) error {
	// No persistence means no file to load at start, but a replica's full
	// sync leaves the primary's snapshot behind as dump.rdb, and
	// redis-server loads it at start even with --save "": a restart would
	// bring back the data of that old sync (a default strategy long since
	// switched away from, say) instead of starting empty.
	if err := os.Remove(filepath.Join(r.dir, "dump.rdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("redis %s: remove the last sync's snapshot: %w", r.Addr, err)
	}
	args := []string{
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", r.dir, "--logfile", "", "--maxclients", "10000",
	}
	if r.clusterTimeout > 0 {
		// Any replica may stand for election however long it was cut off
		// (validity factor 0): the faults kill a master and want its
		// replica to take over, not the cluster to stay down. A master
		// syncs a replica at once, not after 5 s (see QuickSyncs), also
		// after a restart.
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", strconv.Itoa(r.busPort),
			"--cluster-node-timeout", strconv.FormatInt(r.clusterTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0")
	}
	r.mu.Lock()
	if r.primary != "" {
		host, port, _ := net.SplitHostPort(r.primary)
		args = append(args, "--replicaof", host, port)
	}
	r.mu.Unlock()
	cmd := exec.Command(r.bin, args...)
	if r.clockFile != "" {
		cmd.Env = append(os.Environ(), fakeClockEnv(r.preload, r.clockFile)...)
	}
	p, err := StartProcess("redis-server", cmd, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, 15*time.Second, r.Addr, r.ping); err != nil {
		_ = p.Stop(time.Second)
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return nil
}

func (r *Redis) ping(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// Restart stops the server and starts a fresh one on the same port; every key is lost.
func (r *Redis) Restart(ctx context.Context) error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	_ = p.Stop(5 * time.Second)
	if err := relaunch(ctx, r.launch); err != nil {
		return fmt.Errorf("restart redis on %s: %w", r.Addr, err)
	}
	return nil
}

// ReplicaOf makes this server replicate primary (host:port), or stop
// replicating and become a primary when primary is "" (REPLICAOF NO ONE).
// It keeps that role across Restart.
func (r *Redis) ReplicaOf(ctx context.Context, primary string) error {
	host, port := "NO", "ONE"
	if primary != "" {
		var err error
		if host, port, err = net.SplitHostPort(primary); err != nil {
			return fmt.Errorf("redis %s: replica of %q: %w", r.Addr, primary, err)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("redis %s: REPLICAOF %s %s: %w", r.Addr, host, port, err)
	}
	r.mu.Lock()
	r.primary = primary
	r.mu.Unlock()
	return nil
}

// Pid is the current redis-server process id.
func (r *Redis) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc.Pid()
}

// Stop ends the server.
func (r *Redis) Stop() error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	err := p.Stop(5 * time.Second)
	_ = os.RemoveAll(r.dir)
	return err
}
