package localstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// zooKeeperJar is Debian's ZooKeeper server; its manifest's Class-Path
// names the other jars it needs (jute, netty, slf4j, …) in /usr/share/java,
// so the classpath below is complete. With no slf4j binding on it the
// server logs nothing, which is what a throw-away server wants.
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeperOptions configures StartZooKeeper. The zero value works.
type ZooKeeperOptions struct {
	// NoFsync sets forceSync=no: writes are not flushed to the transaction
	// log before they are acknowledged. Much faster, and fine for tests
	// (the test Postgres runs without fsync too); a restart may then lose
	// the last writes.
	NoFsync bool
}

// ZooKeeper is a throw-away standalone ZooKeeper server. Its data directory
// survives Restart (sessions and their ephemeral nodes too, within their
// timeout) and is removed by Stop.
type ZooKeeper struct {
	// Addr is host:port on 127.0.0.1, a one-server INVENTORY_ZOOKEEPER_SERVERS.
	Addr string

	java, dir string
	mu        sync.Mutex
	proc      *Process
}

// tickTime and the session bounds let clients ask for session timeouts
// from 100ms (lock TTLs in tests) up to 2 minutes; ZooKeeper's defaults
// (2 and 20 ticks of 2s) would allow only 4s to 40s. Sessions expire on
// tick boundaries, so one expires at most 50ms after its timeout. Tests
// open a session per replica they build, more than the default 60
// connections per client address: no limit.
const zooKeeperConfig = `tickTime=50
minSessionTimeout=100
maxSessionTimeout=120000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
forceSync=%s
maxClientCnxns=0
`

// StartZooKeeper starts a standalone ZooKeeper (Debian's libzookeeper-java,
// on a headless Java) on a free loopback port in a fresh temporary directory that Stop
// removes, with a small heap, and waits until it answers ruok with imok.
func StartZooKeeper(ctx context.Context, opts ZooKeeperOptions) (*ZooKeeper, error) {
	paths, err := Ensure(ctx, "java")
	if err != nil {
		return nil, err
	}
	if !fileExists(zooKeeperJar) {
		return nil, fmt.Errorf("%s: %w; install with: sudo apt-get install -y --no-install-recommends libzookeeper-java default-jre-headless", zooKeeperJar, errNotFound)
	}
	dir, err := os.MkdirTemp("", "inventory-zookeeper-")
	if err != nil {
		return nil, fmt.Errorf("zookeeper dir: %w", err)
	}
	forceSync := "yes"
	if opts.NoFsync {
		forceSync = "no"
	}
	var z *ZooKeeper
	err = OnFreePorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg := fmt.Sprintf(zooKeeperConfig, filepath.Join(dir, "data"), port, forceSync)
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return fmt.Errorf("zookeeper config: %w", err)
		}
		z = &ZooKeeper{Addr: hostPort(port), java: paths[0], dir: dir}
		if err := z.launch(ctx); err != nil {
			if portInUse(port) { // ZooKeeper logs nothing here: say why
				return fmt.Errorf("%w (port %d: address already in use)", err, port)
			}
			return err
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return z, nil
}

func (z *ZooKeeper) launch(ctx context.Context) error {
	// A small heap, the serial collector and one JIT tier: the server idles
	// in tests, and these shorten the JVM's start.
	cmd := exec.Command(z.java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", "/etc/zookeeper/conf:"+zooKeeperJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(z.dir, "zoo.cfg"))
	cmd.Dir = z.dir
	p, err := StartProcess("zookeeper", cmd, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, 60*time.Second, z.Addr, z.ruok); err != nil {
		_ = p.Stop(time.Second)
		return err
	}
	z.mu.Lock()
	z.proc = p
	z.mu.Unlock()
	return nil
}

// ruok is ZooKeeper's four-letter health check: "imok" once it serves.
func (z *ZooKeeper) ruok(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", z.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if string(b) != "imok" {
		return fmt.Errorf("ruok answered %q (%v), want imok", b, err)
	}
	return nil
}

// Restart stops the server and starts it again on the same port and data:
// sessions whose timeout has not passed meanwhile survive.
func (z *ZooKeeper) Restart(ctx context.Context) error {
	z.mu.Lock()
	p := z.proc
	z.mu.Unlock()
	_ = p.Stop(10 * time.Second)
	if err := relaunch(ctx, z.launch); err != nil {
		return fmt.Errorf("restart zookeeper on %s: %w", z.Addr, err)
	}
	return nil
}

// Pid is the current server process id (the JVM itself), e.g. for SIGSTOP.
func (z *ZooKeeper) Pid() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.proc.Pid()
}

// Stop ends the server and removes its directory.
func (z *ZooKeeper) Stop() error {
	z.mu.Lock()
	p := z.proc
	z.mu.Unlock()
	if p == nil {
		return nil
	}
	err := p.Stop(10 * time.Second)
	_ = os.RemoveAll(z.dir)
	return err
}
