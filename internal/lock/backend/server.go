package backend

import "context"

// Server is how to start throw-away servers of a backend's own on this
// machine (Descriptor.Server): what the tests (internal/testenv) and the
// local fleet (internal/fleet) start for it, by its Descriptor, and point
// its Setting at. It lives in a sub-package of the backend that imports
// none of the backend (etcdlock/etcdserve, …): the backend's own tests
// reach it through testenv, which they import.
type Server struct {
	// Start starts the backend's servers on free loopback ports, each in a
	// temporary directory of its own that Stop removes, and returns once
	// they serve.
	Start func(ctx context.Context, o ServerOptions) (Servers, error)
	// Needs are the programs Start runs, as internal/localstack's Ensure
	// names them ("etcd", "java", "redis-server"): a fleet installs what is
	// missing for every backend at once, before anything slow starts.
	Needs []string
	// Shared says that one set of them may serve many test binaries at
	// once (make test starts it once for them all: testenv.StartShared),
	// each test keeping to keys of its own. false: each test binary starts
	// its own, because some test empties them (redlock's).
	Shared bool
}

// ServerOptions are what Server.Start is told. The zero value is the
// tests'.
type ServerOptions struct {
	// Durable makes the servers flush each write to disk before they
	// acknowledge it, as in production (the local fleet); the tests go
	// without, faster. A server with nothing to flush ignores it.
	Durable bool
	// FakeClock starts the first server with a wall clock that a fault can
	// move while it runs (clock-jump: redis-server under libfaketime). A
	// server whose clock cannot be moved so ignores it.
	FakeClock bool
}

// Servers are a backend's running throw-away servers.
type Servers interface {
	// Setting is the value of the backend's Setting that points at them.
	Setting() string
	// Logs are the tails of each server's output by a file name for it
	// ("etcd.log", "redlock-1.log", …), unique among the backends'.
	Logs() map[string]func() string
	// Stop ends them and removes their files.
	Stop() error
}

// Process is one running server as OneServer takes it: what
// internal/localstack's Etcd, ZooKeeper, Redis, … have.
type Process interface {
	// Logs is the tail of its output.
	Logs() string
	// Stop ends it and removes its files.
	Stop() error
}

// OneServer is the Servers of one server process p: setting is the value
// that points at it, logFile the name of its output's file.
func OneServer(setting, logFile string, p Process) Servers {
	return oneServer{setting: setting, logFile: logFile, p: p}
}

type oneServer struct {
	setting, logFile string
	p                Process
}

func (s oneServer) Setting() string { return s.setting }

func (s oneServer) Logs() map[string]func() string {
	return map[string]func() string{s.logFile: s.p.Logs}
}

func (s oneServer) Stop() error { return s.p.Stop() }
