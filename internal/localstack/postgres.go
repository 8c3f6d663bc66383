package localstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresOptions tunes a throw-away Postgres. The zero value is a durable
// server (fsync on), as the measurements in the README assume.
type PostgresOptions struct {
	// NoFsync turns fsync and synchronous_commit off: much faster, and fine
	// for tests whose data dies with the process.
	NoFsync bool
	// MaxConnections is max_connections; default 300.
	MaxConnections int
	// Dir is the directory the server's own directory is made in; empty
	// means the system's temporary directory (os.TempDir).
	Dir string
}

// Postgres is a throw-away Postgres server with an "inventory" database.
type Postgres struct {
	// URL points at the "inventory" database as the "postgres" superuser.
	URL string
	// Port is the TCP port on 127.0.0.1.
	Port int

	dir  string
	bin  string              // the postgres binary
	args []string            // its command line, to start it again
	cred *syscall.Credential // who it runs as; nil for ourselves
	mu   sync.Mutex
	proc *Process // replaced by Restart
}

// StartPostgres initialises a cluster (a copy of initdb's, see initData) and starts postgres on a free loopback port in a
// fresh temporary directory that Stop removes. As root it runs both as the
// "postgres" account, since Postgres refuses to run as root.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	paths, err := Ensure(ctx, "initdb", "postgres")
	if err != nil {
		return nil, err
	}
	initdb, postgres := paths[0], paths[1]
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.Dir, "inventory-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
	}
	pg := &Postgres{dir: dir}
	if err := pg.start(ctx, initdb, postgres, cred, opts); err != nil {
		_ = pg.Stop()
		return nil, err
	}
	return pg, nil
}

func (pg *Postgres) start(ctx context.Context, initdb, postgres string, cred *syscall.Credential, opts PostgresOptions) error {
	if cred != nil {
		if err := os.Chown(pg.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("postgres dir: %w", err)
		}
	}
	data := filepath.Join(pg.dir, "data")
	if err := initData(ctx, initdb, cred, data); err != nil {
		return err
	}

	err := OnFreePorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		pg.Port = port
		pg.URL = fmt.Sprintf("postgres://postgres@%s/inventory?sslmode=disable", hostPort(port))
		pg.bin, pg.args, pg.cred = postgres, pg.serverArgs(data, port, opts), cred
		return pg.launch(ctx)
	})
	if err != nil {
		return err
	}
	if err := exec1(ctx, pg.adminURL(), "CREATE DATABASE inventory"); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// serverArgs is the postgres command line for the cluster in data on port.
func (pg *Postgres) serverArgs(data string, port int, opts PostgresOptions) []string {
	maxConn := opts.MaxConnections
	if maxConn == 0 {
		maxConn = 300
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + pg.dir,
		"-c", "max_connections=" + strconv.Itoa(maxConn),
		"-c", "shared_buffers=128MB",
	}
	if opts.NoFsync {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return args
}

// launch starts the server on its data directory and port and waits until
// it answers queries.
func (pg *Postgres) launch(ctx context.Context) error {
	cmd := exec.Command(pg.bin, pg.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	cmd.Dir = pg.dir
	p, err := StartProcess("postgres", cmd, syscall.SIGINT) // SIGINT = fast shutdown
	if err != nil {
		return err
	}
	pg.mu.Lock()
	pg.proc = p
	pg.mu.Unlock()
	return p.waitReady(ctx, 30*time.Second, hostPort(pg.Port), func(ctx context.Context) error { return exec1(ctx, pg.adminURL(), "SELECT 1") })
}

func (pg *Postgres) adminURL() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", hostPort(pg.Port))
}

func (pg *Postgres) process() *Process {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.proc
}

// RestartImmediate stops the server with an immediate shutdown (SIGQUIT:
// every session is cut, open transactions are lost, and the next start runs
// crash recovery), starts it again on the same port and data, and waits
// until it answers queries. A durable server keeps every committed
// transaction; with NoFsync (synchronous_commit off) the last commits
// acknowledged may be lost as well.
func (pg *Postgres) RestartImmediate(ctx context.Context) error {
	p := pg.process()
	if err := p.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Errorf("postgres immediate shutdown: %w", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return fmt.Errorf("postgres immediate shutdown: %w", ctx.Err())
	}
	if err := relaunch(ctx, pg.launch); err != nil {
		return fmt.Errorf("restart postgres on port %d: %w", pg.Port, err)
	}
	return nil
}

// CreateDatabase creates another empty database on the same server and
// returns its URL, so tests can isolate themselves cheaply.
func (pg *Postgres) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := exec1(ctx, pg.adminURL(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", hostPort(pg.Port), name), nil
}

// Pid is the postmaster's process id.
func (pg *Postgres) Pid() int { return pg.process().Pid() }

// Stop shuts the server down and removes its directory.
func (pg *Postgres) Stop() error {
	if p := pg.process(); p != nil {
		_ = p.Stop(10 * time.Second)
	}
	return os.RemoveAll(pg.dir)
}

// execTimeout bounds one statement of exec1 (its connection included): a
// CREATE DATABASE copies and syncs a whole template, which took over 5s on
// a 2-core machine running three race-enabled test binaries at once.
const execTimeout = 30 * time.Second

// exec1 runs one statement on its own connection to url.
func exec1(ctx context.Context, url, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// unprivileged returns the credentials of the "postgres" account when running
// as root, and nil (run as ourselves) otherwise.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and Postgres refuses root, but there is no \"postgres\" account to run it as (apt-get install -y postgresql creates one): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
