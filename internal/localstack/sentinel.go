package localstack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inventory-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("sentinel dir: %w", err)
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
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("sentinel config: %w", err)
	}
	s := &Sentinel{Addr: hostPort(port), Master: master, dir: dir}
	p, err := StartProcess("redis-sentinel", exec.Command(paths[0], conf, "--sentinel"), syscall.SIGTERM)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.proc = p
	if err := p.waitReady(ctx, 15*time.Second, s.masterKnown); err != nil {
		_ = s.Stop()
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
