package localstack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Nginx is a running nginx with its configuration in a temporary directory.
type Nginx struct {
	// Addr is the host:port nginx listens on.
	Addr string

	dir  string
	proc *Process
}

// StartNginx writes files (which must include "nginx.conf"; other entries
// are files it includes) into a fresh temporary directory, checks the
// configuration with `nginx -t`, starts nginx in the foreground and waits
// until addr accepts connections.
func StartNginx(ctx context.Context, addr string, files map[string]string) (*Nginx, error) {
	if _, ok := files["nginx.conf"]; !ok {
		return nil, fmt.Errorf("start nginx: files has no nginx.conf")
	}
	paths, err := Ensure(ctx, "nginx")
	if err != nil {
		return nil, err
	}
	// Readiness is "addr accepts connections", which another server already
	// listening there would fake: refuse a taken address up front.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("start nginx on %s: %w", addr, err)
	}
	_ = l.Close()
	dir, err := os.MkdirTemp("", "inventory-nginx-")
	if err != nil {
		return nil, fmt.Errorf("nginx dir: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("write nginx %s: %w", name, err)
		}
	}
	conf := filepath.Join(dir, "nginx.conf")
	global := fmt.Sprintf("daemon off; master_process on; pid %s; error_log stderr warn;", filepath.Join(dir, "nginx.pid"))
	args := []string{"-p", dir, "-c", conf, "-e", "stderr", "-g", global}

	if out, err := exec.CommandContext(ctx, paths[0], append([]string{"-t", "-q"}, args...)...).CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx -t rejects the configuration: %w\n%s", err, lastLines(string(out), 20))
	}
	p, err := StartProcess("nginx", exec.Command(paths[0], args...), syscall.SIGQUIT) // SIGQUIT = graceful
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	n := &Nginx{Addr: addr, dir: dir, proc: p}
	if err := p.waitReady(ctx, 15*time.Second, addr, func(ctx context.Context) error { return dialable(ctx, addr) }); err != nil {
		_ = n.Stop()
		return nil, err
	}
	return n, nil
}

// Logs returns what nginx wrote to stderr so far.
func (n *Nginx) Logs() string { return n.proc.Logs() }

// Stop shuts nginx down gracefully and removes its directory.
func (n *Nginx) Stop() error {
	_ = n.proc.Stop(5 * time.Second)
	return os.RemoveAll(n.dir)
}
