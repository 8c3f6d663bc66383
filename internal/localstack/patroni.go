package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PatroniOptions configures StartPatroni.
type PatroniOptions struct {
	// Etcd is host:port of the etcd that Patroni keeps its leader lock and
	// the cluster's state in (its DCS); required. Clusters can share one
	// etcd: each keeps its keys under a namespace of its own.
	Etcd string
	// Async replicates asynchronously (synchronous_mode off,
	// synchronous_commit local): a commit is acknowledged once it is on
	// the primary's disk, before the standby has it, so a failover loses
	// the last acknowledged commits. Default false: synchronous_mode on,
	// and no commit is acknowledged before the standby has it on disk.
	Async bool
	// MaxConnections is max_connections; default 300.
	MaxConnections int
}

// Patroni is a throw-away two-member Postgres cluster under Patroni on
// loopback: a primary and a standby (synchronous unless
// PatroniOptions.Async) with an "inventory" database. Patroni fails over
// by itself when the primary's Postgres dies: primary_start_timeout is 0,
// so the standby is promoted at once instead of the crashed primary being
// restarted in place. The members' roles are Patroni's to decide; ask
// Primary which one leads now.
type Patroni struct {
	// URL names both members with target_session_attrs=read-write, so a
	// client that connects anew reaches whichever is primary (pgx tries
	// the hosts in turn and keeps the one that accepts writes).
	URL string
	// Members are the two members; their roles change with failovers.
	Members []*PatroniMember
	// Namespace is the cluster's etcd prefix (its keys are under
	// Namespace + "inventory/").
	Namespace string
	// Async is PatroniOptions.Async.
	Async bool

	dir string
}

// PatroniMember is one Patroni process and the Postgres it runs.
type PatroniMember struct {
	// Name is the member's name in the cluster, e.g. "pg1".
	Name string
	// Port is its Postgres port on 127.0.0.1; API is its Patroni REST API,
	// e.g. "http://127.0.0.1:8008".
	Port int
	API  string

	data string // the Postgres data directory
	proc *Process
}

// patroniScope is the cluster name every stack's cluster has; namespaces
// keep them apart.
const patroniScope = "inventory"

// patroniWait bounds the waits for a cluster to form or heal.
const patroniWait = 2 * time.Minute

// StartPatroni starts two Patroni members on free loopback ports, in a
// temporary directory that Stop removes, and waits until one is primary,
// the other its synchronous standby (or a streaming replica with Async),
// and the "inventory" database exists. Patroni and Postgres run as the
// "postgres" account when running as root, since Postgres refuses root.
func StartPatroni(ctx context.Context, opts PatroniOptions) (*Patroni, error) {
	if opts.Etcd == "" {
		return nil, errors.New("start patroni: no etcd given (PatroniOptions.Etcd)")
	}
	paths, err := Ensure(ctx, "patroni", "postgres")
	if err != nil {
		return nil, err
	}
	// Patroni runs pg_ctl, pg_controldata, pg_rewind and pg_basebackup
	// from postgres's directory: the real one, not a directory of links.
	real, err := filepath.EvalSymlinks(paths[1])
	if err != nil {
		return nil, fmt.Errorf("start patroni: %w", err)
	}
	patroni, binDir := paths[0], filepath.Dir(real)
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inventory-patroni-")
	if err != nil {
		return nil, fmt.Errorf("patroni dir: %w", err)
	}
	c := &Patroni{dir: dir, Async: opts.Async, Namespace: "/inventory-" + randomHex(6) + "/"}
	if err := c.start(ctx, patroni, binDir, cred, opts); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// start launches the members on free ports and waits for a healthy
// cluster, again on fresh ports while a member's Postgres or REST API finds
// its port taken (by another process, between FreePort's probe and the
// bind).
func (c *Patroni) start(ctx context.Context, patroni, binDir string, cred *syscall.Credential, opts PatroniOptions) error {
	err := OnFreePorts(func() error {
		if err := c.discardMembers(); err != nil {
			return err
		}
		ports, err := freePorts(4)
		if err != nil {
			return err
		}
		return c.launch(ctx, patroni, binDir, cred, opts, ports)
	})
	if err != nil {
		return err
	}
	if err := exec1(ctx, c.adminURL(), "CREATE DATABASE inventory"); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return c.awaitDatabase(ctx, "inventory")
}

// launch writes the members' configurations for ports (Postgres and REST
// API of each member in turn), starts them, and waits until the cluster
// is healthy, or until a member reports a port taken.
func (c *Patroni) launch(ctx context.Context, patroni, binDir string, cred *syscall.Credential, opts PatroniOptions, ports []int) error {
	var hosts []string
	for i := range 2 {
		pgPort, apiPort := ports[2*i], ports[2*i+1]
		m := &PatroniMember{Name: fmt.Sprintf("pg%d", i+1), Port: pgPort, API: "http://" + hostPort(apiPort),
			data: filepath.Join(c.dir, fmt.Sprintf("data%d", i+1))}
		if err := os.WriteFile(filepath.Join(c.dir, m.Name+".yml"), []byte(c.config(m, apiPort, binDir, opts)), 0o644); err != nil {
			return fmt.Errorf("patroni config: %w", err)
		}
		c.Members = append(c.Members, m)
		hosts = append(hosts, hostPort(pgPort))
	}
	if cred != nil {
		if err := chownTree(c.dir, cred); err != nil {
			return fmt.Errorf("patroni dir: %w", err)
		}
	}
	c.URL = fmt.Sprintf("postgres://postgres@%s/inventory?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","))
	for _, m := range c.Members {
		cmd := exec.Command(patroni, filepath.Join(c.dir, m.Name+".yml"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = c.dir
		cmd.Env = append(os.Environ(), "HOME="+c.dir)
		p, err := StartProcess("patroni "+m.Name, cmd, syscall.SIGTERM)
		if err != nil {
			return err
		}
		m.proc = p
	}
	// A member whose Postgres finds its port taken may not exit (Patroni
	// starts it again and again) or may exit with a traceback that pushes
	// the bind error out of the poll's report: the members' whole logs
	// decide, while waiting and after.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := c.poll(ctx, patroniWait, func(ctx context.Context) error {
		if err := c.portTaken(); err != nil {
			cancel()
			return err
		}
		_, err := c.healthy(ctx)
		return err
	})
	if taken := c.portTaken(); err != nil && taken != nil {
		return fmt.Errorf("%w\n%s", taken, c.Logs())
	}
	return err
}

// portTaken is an error naming the first member whose output says one of
// its ports was taken, or nil.
func (c *Patroni) portTaken() error {
	for _, m := range c.Members {
		if saysPortTaken(m.proc.Logs()) {
			return fmt.Errorf("patroni %s: a port was taken (address already in use)", m.Name)
		}
	}
	return nil
}

// discardMembers stops the members of a failed launch and removes their
// data, and gives the cluster a fresh etcd namespace, for another launch.
func (c *Patroni) discardMembers() error {
	if len(c.Members) == 0 {
		return nil
	}
	c.stopMembers()
	for _, m := range c.Members {
		if err := os.RemoveAll(m.data); err != nil {
			return fmt.Errorf("patroni dir: %w", err)
		}
	}
	c.Members = nil
	c.Namespace = "/inventory-" + randomHex(6) + "/"
	return nil
}

// config is member m's Patroni configuration. The timings make failovers
// quick on loopback: Patroni's loop runs every second, and a crashed
// primary is failed over at once (primary_start_timeout 0). pg_rewind (or,
// failing it, a fresh copy) brings a failed primary back as a standby when
// it wrote WAL the new primary never had.
func (c *Patroni) config(m *PatroniMember, apiPort int, binDir string, opts PatroniOptions) string {
	maxConn := opts.MaxConnections
	if maxConn == 0 {
		maxConn = 300
	}
	syncMode, syncCommit := "true", "on"
	if opts.Async {
		syncMode, syncCommit = "false", "local"
	}
	return fmt.Sprintf(`scope: %[1]s
namespace: %[2]s
name: %[3]s
log:
  level: WARNING
restapi:
  listen: %[4]s
  connect_address: %[4]s
etcd3:
  hosts: %[5]s
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 16777216
    primary_start_timeout: 0
    synchronous_mode: %[6]s
    postgresql:
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: true
      remove_data_directory_on_diverged_timelines: true
      parameters:
        max_connections: %[7]d
        shared_buffers: 128MB
        synchronous_commit: %[8]s
        wal_keep_size: 512MB
  initdb:
    - encoding: UTF8
    - auth: trust
    - no-sync
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[9]d
  connect_address: 127.0.0.1:%[9]d
  data_dir: %[10]s
  bin_dir: %[11]s
  pgpass: %[12]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: %[13]s
`, patroniScope, c.Namespace, m.Name, strings.TrimPrefix(m.API, "http://"), opts.Etcd,
		syncMode, maxConn, syncCommit, m.Port, m.data, binDir, filepath.Join(c.dir, m.Name+".pgpass"), c.dir)
}

// adminURL is URL's "postgres" database.
func (c *Patroni) adminURL() string {
	return strings.Replace(c.URL, "/inventory?", "/postgres?", 1)
}

// CreateDatabase creates another empty database (on the primary, so on
// both members) and returns its multi-host URL.
func (c *Patroni) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := exec1(ctx, c.adminURL(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	if err := c.awaitDatabase(ctx, name); err != nil {
		return "", err
	}
	return strings.Replace(c.URL, "/inventory?", "/"+name+"?", 1), nil
}

// Role asks m's REST API whether it is what path says: "primary" (the
// leader, running), "sync" (the synchronous standby), "replica" (a
// running standby). Patroni answers 200 for yes and 503 for no.
func (m *PatroniMember) Role(ctx context.Context, path string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.API+"/"+path, nil)
	if err != nil {
		return false, err
	}
	// Not http.DefaultTransport (tests may wrap it), and nothing idle left
	// behind for leak checks.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusServiceUnavailable:
		return false, nil
	}
	return false, fmt.Errorf("patroni %s GET /%s: %s", m.Name, path, resp.Status)
}

// standbyRole is the REST path a healthy standby of c answers 200 on.
func (c *Patroni) standbyRole() string {
	if c.Async {
		return "replica"
	}
	return "sync"
}

// Primary returns the member that leads now: Patroni answers for it as
// primary and its Postgres accepts writes (Patroni calls a member primary
// as soon as it has asked Postgres to promote, a moment before it can
// write). An error when none does (during a failover).
func (c *Patroni) Primary(ctx context.Context) (*PatroniMember, error) {
	var errs []error
	for _, m := range c.Members {
		ok, err := m.Role(ctx, "primary")
		if ok {
			if err = m.writable(ctx); err == nil {
				return m, nil
			}
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no member of the Patroni cluster is primary: %w", errors.Join(errs...))
}

// writable returns nil when m's Postgres is out of recovery.
func (m *PatroniMember) writable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, m.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return err
	}
	if standby {
		return fmt.Errorf("%s's Postgres is still in recovery", m.Name)
	}
	return nil
}

// URL is the URL of database db on m alone.
func (m *PatroniMember) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", hostPort(m.Port), db)
}

// awaitDatabase waits until database db can be connected to on every
// member: a standby has it only once it has replayed its creation, and
// pgx, finding a host without the database, tries no other.
func (c *Patroni) awaitDatabase(ctx context.Context, db string) error {
	return c.poll(ctx, patroniWait, func(ctx context.Context) error {
		for _, m := range c.Members {
			if err := exec1(ctx, m.URL(db), "SELECT 1"); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// Other is the member that is not m.
func (c *Patroni) Other(m *PatroniMember) *PatroniMember {
	if c.Members[0] == m {
		return c.Members[1]
	}
	return c.Members[0]
}

// WaitPrimary waits up to timeout until m is primary (see Primary).
func (c *Patroni) WaitPrimary(ctx context.Context, m *PatroniMember, timeout time.Duration) error {
	return c.poll(ctx, timeout, func(ctx context.Context) error {
		ok, err := m.Role(ctx, "primary")
		if ok {
			err = m.writable(ctx)
		} else if err == nil {
			err = fmt.Errorf("Patroni does not call %s primary (yet)", m.Name)
		}
		return err
	})
}

// WaitHealthy waits up to timeout until one member is primary and the
// other its synchronous standby (with Async, a running replica), and
// returns the primary.
func (c *Patroni) WaitHealthy(ctx context.Context, timeout time.Duration) (*PatroniMember, error) {
	var primary *PatroniMember
	err := c.poll(ctx, timeout, func(ctx context.Context) (err error) {
		primary, err = c.healthy(ctx)
		return err
	})
	return primary, err
}

// healthy returns the primary when the other member is its synchronous
// standby (with Async, a running replica), and an error otherwise.
func (c *Patroni) healthy(ctx context.Context) (*PatroniMember, error) {
	p, err := c.Primary(ctx)
	if err != nil {
		return nil, err
	}
	other := c.Other(p)
	if ok, err := other.Role(ctx, c.standbyRole()); !ok {
		return nil, fmt.Errorf("%s is primary, %s is not its %s standby (yet): %v", p.Name, other.Name, c.standbyRole(), err)
	}
	return p, nil
}

// poll is the package's poll, stopped early when a Patroni process exits,
// with the members' output in the error.
func (c *Patroni) poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	exited := make(chan struct{})
	var once sync.Once
	stop := make(chan struct{})
	defer close(stop)
	for _, m := range c.Members {
		go func() {
			select {
			case <-m.proc.Done():
				once.Do(func() { close(exited) })
			case <-stop:
			}
		}()
	}
	err := poll(ctx, timeout, exited, func(ctx context.Context) error {
		for _, m := range c.Members {
			if m.proc.Exited() {
				return fmt.Errorf("patroni %s exited: %v", m.Name, m.proc.err)
			}
		}
		return check(ctx)
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, c.Logs())
	}
	return nil
}

// Logs returns the tail of each member's output (Patroni's, and its
// Postgres's), one after the other.
func (c *Patroni) Logs() string {
	var b strings.Builder
	for _, m := range c.Members {
		if m.proc != nil {
			fmt.Fprintf(&b, "--- patroni %s ---\n%s\n", m.Name, lastBytes(m.proc.Logs(), 3000))
		}
	}
	return b.String()
}

// Logs returns the tail of m's output.
func (m *PatroniMember) Logs() string { return m.proc.Logs() }

// PostmasterPid is the pid of m's running postmaster, from its
// postmaster.pid; an error when Postgres is not running there.
func (m *PatroniMember) PostmasterPid() (int, error) {
	b, err := os.ReadFile(filepath.Join(m.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: no postmaster.pid: %w", m.Name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: postmaster.pid: %w", m.Name, err)
	}
	if !alive(pid) {
		return 0, fmt.Errorf("%s: postmaster %d is not running", m.Name, pid)
	}
	return pid, nil
}

// Crash kills m's Postgres at once, as a power cut of its server would:
// SIGKILL to the postmaster and every process it started (backends,
// WAL senders), so that none of them writes, answers or sends anything
// more. Patroni, which runs beside it, survives and fails over.
func (m *PatroniMember) Crash() error {
	pid, err := m.PostmasterPid()
	if err != nil {
		return err
	}
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s's postmaster %d: %w", m.Name, pid, err)
	}
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	return nil
}

// HoldBackReplication stops (SIGSTOP) the WAL senders of m, a primary:
// from then on nothing it writes reaches its standby. With synchronous
// replication every commit waits for the standby meanwhile; with
// asynchronous replication commits go on being acknowledged that the
// standby does not have. release continues them (Crash kills them too).
func (m *PatroniMember) HoldBackReplication(ctx context.Context) (release func(), err error) {
	conn, err := pgx.Connect(ctx, m.URL("postgres"))
	if err != nil {
		return nil, fmt.Errorf("hold back %s's replication: %w", m.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_replication")
	if err != nil {
		return nil, fmt.Errorf("hold back %s's replication: %w", m.Name, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("hold back %s's replication: %w", m.Name, err)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("hold back %s's replication: it has no WAL sender (no standby streams from it)", m.Name)
	}
	release = func() {
		for _, pid := range pids {
			_ = syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
			release()
			return nil, fmt.Errorf("hold back %s's replication: stop WAL sender %d: %w", m.Name, pid, err)
		}
	}
	return release, nil
}

// Stop ends both members (Patroni stops its Postgres), kills any
// postmaster left behind, and removes the cluster's directory. Safe to
// call more than once.
func (c *Patroni) Stop() error {
	c.stopMembers()
	return os.RemoveAll(c.dir)
}

// stopMembers stops every member's Patroni and, if Patroni left it
// running, its Postgres.
func (c *Patroni) stopMembers() {
	var wg sync.WaitGroup
	var pids []int
	for _, m := range c.Members {
		if pid, err := m.PostmasterPid(); err == nil {
			pids = append(pids, pid)
		}
		if m.proc != nil {
			wg.Go(func() { _ = m.proc.Stop(20 * time.Second) })
		}
	}
	wg.Wait()
	for _, pid := range pids { // Patroni killed before it stopped its Postgres
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// childrenOf lists pid's child processes.
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(field); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// chownTree gives dir and everything in it to cred's user.
func chownTree(dir string, cred *syscall.Credential) error {
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
