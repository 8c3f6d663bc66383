package localstack

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestFreePortIsBelowTheEphemeralRange: a port FreePort gives is one no
// :0 listener or outgoing connection is handed meanwhile, and can be bound.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < freePortFloor || port >= low {
			t.Fatalf("FreePort() = %d, want a port in [%d, %d), below the ephemeral range", port, freePortFloor, low)
		}
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			t.Fatalf("FreePort() = %d, which cannot be bound: %v", port, err)
		}
		_ = l.Close()
	}
}

// TestServersStartOnAnotherPortWhenTheirsIsTaken: when the port FreePort
// found is bound by another process before the server binds it, the server
// starts on a fresh port instead of failing. The first port handed out here
// is one a listener of this test holds.
func TestServersStartOnAnotherPortWhenTheirsIsTaken(t *testing.T) {
	for _, tc := range []struct {
		name string
		// primary: start a Redis first (on ports of its own), whose address
		// start is given.
		primary bool
		start   func(ctx context.Context, primary string) (addr string, stop func() error, err error)
	}{
		{"redis", false, func(ctx context.Context, _ string) (string, func() error, error) {
			r, err := StartRedis(ctx)
			if err != nil {
				return "", nil, err
			}
			return r.Addr, r.Stop, nil
		}},
		{"etcd", false, func(ctx context.Context, _ string) (string, func() error, error) {
			e, err := StartEtcd(ctx)
			if err != nil {
				return "", nil, err
			}
			return e.Endpoint, e.Stop, nil
		}},
		{"zookeeper", false, func(ctx context.Context, _ string) (string, func() error, error) {
			z, err := StartZooKeeper(ctx, ZooKeeperOptions{})
			if err != nil {
				return "", nil, err
			}
			return z.Addr, z.Stop, nil
		}},
		{"sentinel", true, func(ctx context.Context, primary string) (string, func() error, error) {
			s, err := StartSentinel(ctx, "inventory", primary)
			if err != nil {
				return "", nil, err
			}
			return s.Addr, s.Stop, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var primary string
			if tc.primary {
				r, err := StartRedis(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = r.Stop() }()
				primary = r.Addr
			}
			takenPort, handed := takenFirst(t)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			addr, stop, err := tc.start(ctx, primary)
			if err != nil {
				t.Fatalf("start with its first port taken = %v, want it started on another", err)
			}
			defer func() { _ = stop() }()
			if addr == hostPort(takenPort) || handed() < 2 {
				t.Errorf("started at %s after %d ports handed out, want a port other than the taken %d", addr, handed(), takenPort)
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			_ = c.Close()
		})
	}
}

// TestOnFreePortsTriesAgainOnlyForATakenPort: a start that failed for its
// port is called again, at most portTries times; any other failure, or
// success, ends it.
func TestOnFreePortsTriesAgainOnlyForATakenPort(t *testing.T) {
	taken := errors.New("redis-server exited (exit status 1): EOF\n# Could not create server TCP listening socket 127.0.0.1:29263: bind: Address already in use")
	other := errors.New("postgres exited: FATAL: data directory has wrong ownership")
	for _, tc := range []struct {
		name      string
		errs      []error // what each call returns, the last one ever after
		wantCalls int
		want      error
	}{
		{"ready at once", []error{nil}, 1, nil},
		{"taken, then ready", []error{taken, taken, nil}, 3, nil},
		{"another failure", []error{other}, 1, other},
		{"taken, then another failure", []error{taken, other}, 2, other},
		{"taken every time", []error{taken}, portTries, taken},
	} {
		calls := 0
		err := OnFreePorts(func() error {
			calls++
			return tc.errs[min(calls, len(tc.errs))-1]
		})
		if calls != tc.wantCalls || err != tc.want {
			t.Errorf("%s: %d calls, error %v; want %d calls, error %v", tc.name, calls, err, tc.wantCalls, tc.want)
		}
	}
}

// TestFreePortsAreDifferent: a server's ports are drawn apart even when a
// draw gives a port an earlier one gave (FreePort releases what it probes).
func TestFreePortsAreDifferent(t *testing.T) {
	draws := []int{30001, 30001, 30001, 30002, 30001, 30003}
	freePort = func() (int, error) {
		p := draws[0]
		draws = draws[1:]
		return p, nil
	}
	defer func() { freePort = FreePort }()
	got, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{30001, 30002, 30003}; !slices.Equal(got, want) {
		t.Fatalf("freePorts(3) = %v, want %v", got, want)
	}
}

// takenFirst has freePort hand out, first, a port a listener of the test
// holds, then free ones, until the test ends. It returns that port and how
// many ports were handed out so far.
func takenFirst(t *testing.T) (port int, handed func() int) {
	t.Helper()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	port = taken.Addr().(*net.TCPAddr).Port
	n := 0
	freePort = func() (int, error) {
		n++
		if n == 1 {
			return port, nil
		}
		return FreePort()
	}
	t.Cleanup(func() { freePort = FreePort })
	return port, func() int { return n }
}

// TestAServerNeverTakesAnotherServerForItself: when the port FreePort found
// is taken by another server that answers the same readiness probe (a
// concurrent test binary's redis-server), the new server is not fooled by
// that answer: it starts on a fresh port of its own. Once, a test was
// handed the other server and its "restart" never lost the test's keys.
func TestAServerNeverTakesAnotherServerForItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stranger, err := StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stranger.Stop() }()
	_, port, _ := net.SplitHostPort(stranger.Addr)
	n := 0
	freePort = func() (int, error) {
		n++
		if n == 1 {
			return strconv.Atoi(port)
		}
		return FreePort()
	}
	defer func() { freePort = FreePort }()

	r, err := StartRedis(ctx)
	if err != nil {
		t.Fatalf("start with its first port another server's = %v, want it started on another", err)
	}
	defer func() { _ = r.Stop() }()
	if r.Addr == stranger.Addr {
		t.Fatalf("started at %s, the other server's address", r.Addr)
	}
	if ours, err := listensOn(r.Pid(), r.Addr); err != nil || !ours {
		t.Fatalf("listensOn(its pid, %s) = %v, %v; want its own listener", r.Addr, ours, err)
	}
	if ours, err := listensOn(r.Pid(), stranger.Addr); err != nil || ours {
		t.Fatalf("listensOn(its pid, the other's %s) = %v, %v; want false", stranger.Addr, ours, err)
	}
}
