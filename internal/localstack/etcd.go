package localstack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Etcd is a throw-away single-member etcd on loopback. Its data directory
// survives Restart (a crash and restart keeps the keys, revisions and
// leases, as a real member's disk would) and is removed by Stop.
type Etcd struct {
	// Endpoint is the client address, host:port on 127.0.0.1.
	Endpoint string

	bin, dir  string
	clientURL string
	peerURL   string
	mu        sync.Mutex
	proc      *Process
}

// StartEtcd starts etcd on free loopback ports with a fresh temporary data
// directory that Stop removes, and waits until it answers /health.
func StartEtcd(ctx context.Context) (*Etcd, error) {
	paths, err := Ensure(ctx, "etcd")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inventory-etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcd dir: %w", err)
	}
	var e *Etcd
	err = OnFreePorts(func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		cport, pport := ports[0], ports[1]
		e = &Etcd{
			Endpoint:  hostPort(cport),
			bin:       paths[0],
			dir:       dir,
			clientURL: "http://" + hostPort(cport),
			peerURL:   "http://" + hostPort(pport),
		}
		return e.launch(ctx)
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

func (e *Etcd) launch(ctx context.Context) error {
	cmd := exec.Command(e.bin,
		"--name", "inventory",
		"--data-dir", e.dir,
		"--listen-client-urls", e.clientURL, "--advertise-client-urls", e.clientURL,
		"--listen-peer-urls", e.peerURL, "--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "inventory="+e.peerURL,
		"--logger", "zap", "--log-level", "warn",
	)
	p, err := StartProcess("etcd", cmd, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, 15*time.Second, e.Endpoint, e.health); err != nil {
		_ = p.Stop(time.Second)
		return err
	}
	e.mu.Lock()
	e.proc = p
	e.mu.Unlock()
	return nil
}

// health asks etcd's /health endpoint, which answers true once the member
// has a leader and serves requests.
func (e *Etcd) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.clientURL+"/health", nil)
	if err != nil {
		return err
	}
	// A transport of its own: not http.DefaultTransport, which tests may
	// wrap to check every exchange with the service against its API
	// description; and no idle connection left behind for leak checks.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Restart stops the server and starts it again on the same ports and data
// directory: keys, revisions and unexpired leases survive, as after a crash.
func (e *Etcd) Restart(ctx context.Context) error {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	_ = p.Stop(5 * time.Second)
	if err := relaunch(ctx, e.launch); err != nil {
		return fmt.Errorf("restart etcd on %s: %w", e.Endpoint, err)
	}
	return nil
}

// Pid is the current etcd process id, e.g. for SIGSTOP.
func (e *Etcd) Pid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc.Pid()
}

// Signal sends sig to the etcd process itself.
func (e *Etcd) Signal(sig os.Signal) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc.Signal(sig)
}

// Stop ends the server and removes its data directory.
func (e *Etcd) Stop() error {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	err := p.Stop(5 * time.Second)
	_ = os.RemoveAll(e.dir)
	return err
}
