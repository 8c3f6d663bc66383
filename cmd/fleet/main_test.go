package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"inventory/internal/client"
	"inventory/internal/fleet"
	"inventory/internal/localstack"

	"inventory/internal/testenv"
)

func TestRunServesThroughNginxUntilCancelled(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The listen port is drawn at random, and nginx binds it only once the
	// rest of the fleet is up, some 25 s later: another test binary's server
	// can take it meanwhile (CI once failed "bind: address already in use").
	// The fleet cannot pick another port (the user chose it), so the test
	// draws again.
	var (
		port           int
		base           string
		stdout, stderr *localstack.LogBuffer // written by run's goroutine while the test reads them
		done           chan error
		logs           string
		statePath      string
		admin          *client.Client
	)
	for attempt := 1; ; attempt++ {
		p, err := localstack.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		port, base = p, "http://127.0.0.1:"+strconv.Itoa(p)
		stdout, stderr = new(localstack.LogBuffer), new(localstack.LogBuffer)
		done = make(chan error, 1)
		logs = t.TempDir()
		statePath = filepath.Join(t.TempDir(), "bin", "fleet.json")
		go func() {
			done <- run(ctx, []string{"--listen", "127.0.0.1:" + strconv.Itoa(port), "--logs", logs, "--state", statePath, "--strategy", "atomic"}, stdout, stderr)
		}()
		// Up means run has said so (every part of the fleet checked), not
		// merely that nginx answers: cancelling before that is a failed start.
		admin = client.New(base, client.Options{AdminToken: "demo-admin-token", HTTPClient: http.DefaultClient})
		err = waitUp(ctx, stdout, admin, done)
		if err == nil {
			break
		}
		if localstack.PortTaken(err) && attempt < 3 {
			t.Logf("port %d was taken before nginx bound it; drawing another: %v", port, err)
			continue
		}
		t.Fatalf("at %s: %v", base, err)
	}
	if p, err := admin.Restock(ctx, "sku-1", client.RestockRequest{Quantity: 1}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-1 with the demo token = %+v, %v; want it created", p, err)
	}
	// --strategy is the fleet default every replica sells with, and the
	// fleet says so.
	for range 2 { // nginx spreads GET /strategy over the replicas
		if s, err := admin.Strategy(ctx); err != nil || s != "atomic" {
			t.Errorf("GET /strategy of a fleet started with --strategy atomic = %q, %v; want atomic", s, err)
		}
	}
	if !strings.Contains(stdout.String(), "fleet default strategy atomic") {
		t.Errorf("stdout = %q, want it to name the fleet default strategy atomic", stdout.String())
	}
	// The shell's copy of the state names the same fleet, for make psql;
	// and the fleet printed the psql line to paste.
	if env, err := os.ReadFile(fleet.EnvPath(statePath)); err != nil || !strings.Contains(string(env), "FLEET_URL='"+base+"'") ||
		!strings.Contains(string(env), "FLEET_STRATEGY='atomic'") {
		t.Errorf("%s = %q, %v; want the fleet at %s, its default atomic", fleet.EnvPath(statePath), env, err, base)
	}
	// While it runs, the state file names it and its Postgres, for the
	// load tester given the fleet's URL by another name; and it printed
	// the load tester's command naming that Postgres.
	st, why := fleet.FleetAt(statePath, "http://localhost:"+strconv.Itoa(port))
	if why != "" || st.AdminToken != "demo-admin-token" || !strings.HasPrefix(st.PostgresURL, "postgres://") {
		t.Errorf("FleetAt(the state file) = %+v, %q; want the fleet, its token and its Postgres", st, why)
	} else {
		for _, want := range []string{"--postgres-url '" + st.PostgresURL + "'", "psql '" + st.PostgresURL + "'", "make psql Q='select "} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout = %q, want it to say %s", stdout.String(), want)
			}
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	if _, err := admin.Healthz(context.Background()); err == nil {
		t.Errorf("%s still answers after run returned", base)
	}
	for _, p := range []string{statePath, fleet.EnvPath(statePath)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after run returned: %v, want it removed", p, err)
		}
	}
	if !strings.Contains(stdout.String(), "inventory is up at "+base) {
		t.Errorf("stdout = %q, want it to name %s", stdout.String(), base)
	}
	// It said what it was doing, and every process's log is a file in the
	// directory it named first.
	for _, want := range []string{"logs: " + logs, "building the service", "starting nginx", "stopped; logs in " + logs} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr = %q, want it to say %q", stderr.String(), want)
		}
	}
	for _, name := range []string{"inventory-1.log", "inventory-2.log", "nginx.log", "postgres.log", "redis.log",
		"redlock-1.log", "redlock-2.log", "redlock-3.log", "etcd.log", "zookeeper.log"} {
		if _, err := os.Stat(filepath.Join(logs, name)); err != nil {
			t.Errorf("log file: %v", err)
		}
	}
	// The replica's last words (its shutdown) are in its file.
	if b, err := os.ReadFile(filepath.Join(logs, "inventory-1.log")); err != nil || !strings.Contains(string(b), `"msg":"serving"`) || !strings.Contains(string(b), `"msg":"stopped"`) {
		t.Errorf("inventory-1.log = %.2000s (%v), want its JSON log from start to shutdown", b, err)
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--replicas", "0"}, {"--work-delay", "-1s"}, {"--watchdog-interval", "-1s"}, {"extra"}, {"--nope"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

// An unknown --strategy is refused by name, with the names it could be,
// before anything starts (the address is even taken: the name is checked
// first).
func TestRunRefusesAnUnknownStrategyBeforeStartingAnything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr localstack.LogBuffer
	err = run(context.Background(), []string{"--strategy", "nope", "--listen", ln.Addr().String(), "--logs", t.TempDir()}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), `--strategy: unknown strategy "nope" (want one of none, local, setnx, redis,`) {
		t.Errorf("run(--strategy nope) = %v, want the unknown name and the names to choose from", err)
	}
	if out := stderr.String(); out != "" {
		t.Errorf("run said %q before refusing, want nothing started", out)
	}
}

// A busy --listen address fails at once, before the build or any server:
// it used to fail only after everything had started.
func TestRunRefusesABusyAddressBeforeStartingAnything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	logs := t.TempDir()
	var stderr localstack.LogBuffer
	start := time.Now()
	err = run(context.Background(), []string{"--listen", ln.Addr().String(), "--logs", logs}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "LISTEN=") {
		t.Fatalf("run(--listen %s) with the address taken = %v, want an error naming it and make fleet LISTEN=", ln.Addr(), err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("run took %s to refuse a busy address, want it refused before anything starts", took)
	}
	if out := stderr.String(); out != "" {
		t.Errorf("run said %q before refusing, want nothing started", out)
	}
	if pids, err := localstack.ChildPIDs(); err != nil || len(pids) != 0 {
		t.Errorf("child processes after run refused a busy address: %v (%v), want none", pids, err)
	}
}

// waitUp waits until run (whose answer comes on done) has said the fleet is
// up and its nginx answers; run's error when it returned first.
func waitUp(ctx context.Context, stdout *localstack.LogBuffer, admin *client.Client, done <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if strings.Contains(stdout.String(), "inventory is up at ") {
			if h, err := admin.Healthz(ctx); err == nil && strings.HasPrefix(h.Instance, "inventory-") {
				return nil
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("run returned before the fleet answered: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("no answer through nginx within 2 minutes")
		}
	}
}
