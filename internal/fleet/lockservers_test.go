package fleet

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"inventory/internal/localstack"
	"inventory/internal/lock/backend"
)

// TestStartLockServersStartsEveryBackendsServers: the fleet starts the
// servers of every lock backend in the list it is given, by the backend's
// Descriptor and with the fleet's options, gives the replicas each one's
// setting, keeps each one's logs under the names it gives, finds the Redis
// servers among them for the faults, and stops them all; one that fails to
// start is named in the error, and what did start is still stopped.
func TestStartLockServersStartsEveryBackendsServers(t *testing.T) {
	var mu sync.Mutex // started side by side
	var stopped []string
	var gotOpts []backend.ServerOptions
	redis := &localstack.Redis{Addr: "127.0.0.1:1"}
	fake := func(name string, fail bool, rdb ...*localstack.Redis) *backend.Server {
		return &backend.Server{Needs: []string{"true"}, Start: func(_ context.Context, o backend.ServerOptions) (backend.Servers, error) {
			mu.Lock()
			defer mu.Unlock()
			gotOpts = append(gotOpts, o)
			if fail {
				return nil, errors.New("no such program")
			}
			return &fakeServers{name: name, redis: rdb, stopped: &stopped, mu: &mu}, nil
		}}
	}
	list := []backend.Descriptor{
		{Name: "alock", Setting: "INVENTORY_ALOCK_SERVERS", Server: fake("alock", false)},
		{Name: "block", Setting: "INVENTORY_BLOCK_URLS", Server: fake("block", false, redis)},
		{Name: "clock", Setting: "INVENTORY_CLOCK_ENDPOINTS", Server: fake("clock", true)},
	}
	f := &Fleet{}
	o := backend.ServerOptions{Durable: true, FakeClock: true}
	err := f.startLockServers(context.Background(), list, o)
	if err == nil || !strings.Contains(err.Error(), "lock backend clock") || !strings.Contains(err.Error(), "no such program") {
		t.Errorf("startLockServers(alock, block, clock failing) = %v, want an error naming clock and why", err)
	}
	if len(gotOpts) != 3 || slices.ContainsFunc(gotOpts, func(g backend.ServerOptions) bool { return g != o }) {
		t.Errorf("the Servers' Start were told %+v, want each told %+v", gotOpts, o)
	}
	want := map[string]string{"INVENTORY_ALOCK_SERVERS": "alock-value", "INVENTORY_BLOCK_URLS": "block-value"}
	if got := f.LockSettings(); !maps.Equal(got, want) {
		t.Errorf("LockSettings() = %v, want %v", got, want)
	}
	r, err := f.newReplica("inventory-1", "inventory", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if r.env[k] != v {
			t.Errorf("the replica's %s = %q, want %q", k, r.env[k], v)
		}
	}
	if logs := slices.Sorted(maps.Keys(f.logs())); !slices.Equal(logs, []string{"alock.log", "block.log"}) {
		t.Errorf("the fleet's log files = %q, want alock.log and block.log", logs)
	}
	if !slices.Equal(f.RedlockServers, []*localstack.Redis{redis}) {
		t.Errorf("RedlockServers = %v, want block's Redis server", f.RedlockServers)
	}
	if err := f.Stop(); err != nil {
		t.Errorf("Stop = %v", err)
	}
	slices.Sort(stopped)
	if !slices.Equal(stopped, []string{"alock", "block"}) {
		t.Errorf("Stop stopped %q, want alock's and block's servers", stopped)
	}
}

type fakeServers struct {
	name    string
	redis   []*localstack.Redis
	stopped *[]string
	mu      *sync.Mutex
}

func (s *fakeServers) Setting() string { return s.name + "-value" }

func (s *fakeServers) Logs() map[string]func() string {
	return map[string]func() string{s.name + ".log": func() string { return "" }}
}

func (s *fakeServers) RedisServers() []*localstack.Redis { return s.redis }

func (s *fakeServers) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.stopped = append(*s.stopped, s.name)
	return nil
}
