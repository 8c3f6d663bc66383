package localstack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a throw-away Redis Sentinel (redis-server --sentinel)
// watching one primary under a master name, quick to fail it over: the
// primary is "down" after a second without an answer.
type Sentinel struct {
	// Addr is host:port on 127.0.0.1; Master is the monitored master's name.
	Addr, Master string

	dir  string
	proc *Process
}

// StartSentinel starts a Sentinel monitoring the Redis primary at
// primaryAddr (host:port) as master, on a free loopback port, in a fresh
// temporary directory that Stop removes (Sentinel rewrites its config file).
func StartSentinel(ctx context.Context, master, primaryAddr string) (*Sentinel, error) {
	paths, err := Ensure(ctx, "redis-server")
	if err != nil {
		return nil, err
	}
	host, primaryPort, err := splitHostPort(primaryAddr)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inventory-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("sentinel dir: %w", err)
	}
	var s *Sentinel
	err = OnFreePorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
sentinel monitor %s %s %d 1
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 5000
sentinel parallel-syncs %[3]s 1
`, port, dir, master, host, primaryPort)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return fmt.Errorf("sentinel config: %w", err)
		}
		s = &Sentinel{Addr: hostPort(port), Master: master, dir: dir}
		if s.proc, err = StartProcess("redis-sentinel", exec.Command(paths[0], conf, "--sentinel"), syscall.SIGTERM); err != nil {
			return err
		}
		if err := s.proc.waitReady(ctx, 15*time.Second, s.Addr, s.masterKnown); err != nil {
			_ = s.proc.Stop(5 * time.Second)
			return err
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// masterKnown answers nil once the Sentinel names the master's address.
func (s *Sentinel) masterKnown(ctx context.Context) error {
	_, err := s.MasterAddr(ctx)
	return err
}

// MasterAddr is the current primary's host:port as this Sentinel sees it.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: master %s: %w", s.Addr, s.Master, err)
	}
	return addr[0] + ":" + addr[1], nil
}

// WaitMaster waits up to timeout until the Sentinel names addr
// (host:port) as the master's address with its failover finished (flags
// "master" alone): after a failover, until it has promoted the replica at
// addr and is done reconfiguring. (It names the promoted replica while
// the failover is still in progress; a server restarted meanwhile can
// then turn the failover another way.)
func (s *Sentinel) WaitMaster(ctx context.Context, addr string, timeout time.Duration) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return poll(ctx, timeout, nil, func(ctx context.Context) error {
		m, err := c.Master(ctx, s.Master).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: master %s: %w", s.Addr, s.Master, err)
		}
		if got := m["ip"] + ":" + m["port"]; got != addr || m["flags"] != "master" {
			return fmt.Errorf("sentinel %s names %s the master (flags %q), want %s with its failover done", s.Addr, got, m["flags"], addr)
		}
		return nil
	})
}

// WaitReplica waits up to timeout until the Sentinel lists addr
// (host:port) as a replica of the master that it would promote: reachable
// (its flags are "slave" alone, no s_down or disconnected).
func (s *Sentinel) WaitReplica(ctx context.Context, addr string, timeout time.Duration) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return poll(ctx, timeout, nil, func(ctx context.Context) error {
		replicas, err := c.Replicas(ctx, s.Master).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: replicas of %s: %w", s.Addr, s.Master, err)
		}
		for _, r := range replicas {
			if r["ip"]+":"+r["port"] == addr {
				if r["flags"] != "slave" {
					return fmt.Errorf("sentinel %s: replica %s has flags %q", s.Addr, addr, r["flags"])
				}
				return nil
			}
		}
		var seen []string
		for _, r := range replicas {
			seen = append(seen, fmt.Sprintf("%s:%s (%s)", r["ip"], r["port"], r["flags"]))
		}
		master, _ := c.GetMasterAddrByName(ctx, s.Master).Result()
		return fmt.Errorf("sentinel %s: %s is not among the replicas of %s (master %v, replicas %v)", s.Addr, addr, s.Master, master, seen)
	})
}

// WaitReplicating waits up to timeout until the Redis server at addr
// replicates primary (host:port) with its link up: the full sync done, so
// a Sentinel may promote it.
func WaitReplicating(ctx context.Context, addr, primary string, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return fmt.Errorf("address %q: %w", primary, err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	want := []string{"role:slave", "master_host:" + host, "master_port:" + port, "master_link_status:up"}
	return poll(ctx, timeout, nil, func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("redis %s: INFO replication: %w", addr, err)
		}
		for _, w := range want {
			if !slices.Contains(strings.Split(info, "\r\n"), w) {
				return fmt.Errorf("redis %s does not replicate %s yet (no %q in INFO replication)", addr, primary, w)
			}
		}
		return nil
	})
}

// QuickSyncs makes each server, as a primary, start a replica's full
// sync at once instead of after the 5 s Redis waits by default for more
// replicas (repl-diskless-sync-delay): after a failover the old primary
// comes back as the new one's replica, and the next failover waits for
// it. The setting lasts until the server restarts.
func QuickSyncs(ctx context.Context, servers ...*Redis) error {
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
		err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("redis %s: CONFIG SET repl-diskless-sync-delay 0: %w", s.Addr, err)
		}
	}
	return nil
}

// Stop ends the Sentinel and removes its directory.
func (s *Sentinel) Stop() error {
	err := s.proc.Stop(5 * time.Second)
	_ = os.RemoveAll(s.dir)
	return err
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port: %w", addr, err)
	}
	return host, port, nil
}
