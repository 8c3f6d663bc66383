package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"inventory/internal/lock/backends"
	"inventory/internal/testenv"
)

// TestRunNamesTheSharedServersOfEveryLockBackend: the command testservers
// runs finds in its environment the variable of every lock backend of
// backends.All whose Server is Shared, naming servers that testservers
// started by the backend's Descriptor, which are gone once it returns.
func TestRunNamesTheSharedServersOfEveryLockBackend(t *testing.T) {
	t.Setenv(testenv.PostgresEnv, "named-by-the-caller") // no lock backend's: not started here
	var want []string
	for _, d := range backends.All() {
		if d.Server != nil && d.Server.Shared {
			env := testenv.ServerEnv(d.Setting)
			t.Setenv(env, "") // unset: under make test it names the run's own
			want = append(want, env)
		}
	}
	if len(want) == 0 {
		t.Fatal("no lock backend of backends.All shares its servers: nothing to check")
	}
	var stdout, stderr bytes.Buffer
	if err := run([]string{"--", "env"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("run(env) = %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(stdout.String()) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			got[k] = v // the last one counts, as exec's does
		}
	}
	for _, env := range want {
		value := got[env]
		if value == "" {
			t.Errorf("the command's %s is empty, want the servers testservers started for it", env)
			continue
		}
		for addr := range strings.SplitSeq(value, ",") {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				continue // not an address to dial
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = c.Close()
				t.Errorf("%s=%s: %s still answers after run returned, want its servers stopped", env, value, addr)
			}
		}
	}
}
