package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inventory/internal/api"
	"inventory/internal/api/spectest"
	"inventory/internal/client"
	"inventory/internal/localstack"

	"github.com/jackc/pgx/v5"

	"inventory/internal/testenv"
)

var binary string // built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "inventory")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = Build(ctx, binary)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build the inventory binary for the fleet tests:", err)
		os.Exit(1)
	}
	// Every exchange of these tests with nginx or a replica goes through
	// http.DefaultTransport: check each against the OpenAPI description.
	checker, err := spectest.New(api.OpenAPI)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var failures specFailures
	http.DefaultTransport = checker.Transport(&failures, http.DefaultTransport)
	code := m.Run()
	if failures.report(os.Stderr) && code == 0 {
		code = 1
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// specFailures collects the exchanges that did not match the OpenAPI
// description; the transport that finds them belongs to no single test.
type specFailures struct {
	mu   sync.Mutex
	errs []string
}

func (f *specFailures) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// report writes the failures to w and says whether there were any.
func (f *specFailures) report(w io.Writer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.errs {
		fmt.Fprintln(w, "FAIL:", e)
	}
	return len(f.errs) > 0
}

// children lists the process ids of this test binary's child processes.
func children(t *testing.T) []int {
	t.Helper()
	pids, err := localstack.ChildPIDs()
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestStartServesThroughNginxAndStopEndsEveryProcess(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx := context.Background()
	before := children(t)
	f, err := Start(ctx, Options{Replicas: 2, Binary: binary, NoFsync: true, AdminToken: "test-token"})
	if err != nil {
		t.Fatalf("Start(2 replicas) = %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })

	if len(f.Replicas) != 2 || f.Replicas[0].Instance != "inventory-1" || f.Replicas[1].Instance != "inventory-2" {
		t.Fatalf("Start(2 replicas).Replicas = %+v, want inventory-1 and inventory-2", f.Replicas)
	}
	if f.AdminToken != "test-token" {
		t.Errorf("Fleet.AdminToken = %q, want the one passed in Options", f.AdminToken)
	}

	// nginx round-robins over both replicas; each answers with its own name.
	seen := map[string]int{}
	for range 20 {
		h, err := f.Client().Healthz(ctx)
		if err != nil {
			t.Fatalf("GET /healthz through nginx: %v\nnginx: %s", err, f.Nginx.Logs())
		}
		seen[h.Instance]++
	}
	if seen["inventory-1"] == 0 || seen["inventory-2"] == 0 || len(seen) != 2 {
		t.Errorf("20 GETs through nginx were answered by %v, want both inventory-1 and inventory-2", seen)
	}

	// The admin token reaches the replicas: a restock through nginx works.
	if _, err := f.Client().Restock(ctx, "sku-fleet", client.RestockRequest{Quantity: 5, Name: "fleet test"}); err != nil {
		t.Fatalf("PUT /products/sku-fleet with the fleet's admin token: %v", err)
	}

	// The replicas migrated the Postgres the fleet reports.
	conn, err := pgx.Connect(ctx, f.PostgresURL)
	if err != nil {
		t.Fatalf("connect %s: %v", f.PostgresURL, err)
	}
	var qty int64
	err = conn.QueryRow(ctx, "SELECT quantity FROM stock WHERE product_id = 'sku-fleet'").Scan(&qty)
	conn.Close(ctx)
	if err != nil || qty != 5 {
		t.Errorf("SELECT quantity of sku-fleet in Fleet.PostgresURL = %d, %v; want 5, nil", qty, err)
	}

	pids := []int{f.Replicas[0].Pid(), f.Replicas[1].Pid(), f.Postgres.Pid(), f.Redis.Pid()}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d not alive while the fleet runs", pid)
		}
	}
	if err := f.Stop(); err != nil {
		t.Errorf("Stop() = %v, want nil (replicas exit 0 on SIGTERM)", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after Stop", pid)
		}
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(f.URL, "http://"), time.Second); err == nil {
		c.Close()
		t.Errorf("nginx at %s still accepts connections after Stop", f.URL)
	}
	if after := children(t); !slices.Equal(after, before) {
		t.Errorf("child processes after Stop = %v, want %v as before Start", after, before)
	}
	if err := f.Stop(); err != nil {
		t.Errorf("second Stop() = %v, want nil", err)
	}
}

func TestNamingTheStrategyThroughNginxNeedsTheAdminToken(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx := context.Background()
	f, err := Start(ctx, Options{Replicas: 2, Binary: binary, NoFsync: true})
	if err != nil {
		t.Fatalf("Start(2 replicas) = %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	admin, anonymous := f.Client(), client.New(f.URL, client.Options{HTTPClient: http.DefaultClient})
	if p, err := admin.Restock(ctx, "sku-anon", client.RestockRequest{Quantity: 5}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-anon = %+v, %v; want it created", p, err)
	}
	// Twice, so that both replicas (nginx round-robins) are asked.
	for range 2 {
		_, err := anonymous.Sell(ctx, client.SaleRequest{ProductID: "sku-anon", Quantity: 1}, client.SaleOptions{Strategy: "none"})
		if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != 401 || p.Slug() != "unauthorized" {
			t.Errorf("anonymous POST /sale?strategy=none through nginx = %v, want 401 problem unauthorized", err)
		}
	}
	if p, err := anonymous.Product(ctx, "sku-anon"); err != nil || p.Quantity != 5 || p.Sold != 0 || p.Sales != 0 {
		t.Errorf("after refused anonymous sales: %+v, %v; want quantity 5, sold 0, sales 0", p, err)
	}
	if sale, err := admin.Sell(ctx, client.SaleRequest{ProductID: "sku-anon", Quantity: 1}, client.SaleOptions{Strategy: "none"}); err != nil || sale.Strategy != "none" {
		t.Errorf("POST /sale?strategy=none with the admin token = %+v, %v; want sold with none", sale, err)
	}
}

func TestStopEndsAStoppedReplica(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	// A replica frozen by SIGSTOP (as fault tests do) must not hang Stop.
	f, err := Start(context.Background(), Options{Replicas: 1, Binary: binary, NoFsync: true})
	if err != nil {
		t.Fatalf("Start(1 replica) = %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	pid := f.Replicas[0].Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.Stop(); err != nil {
		t.Errorf("Stop() with a SIGSTOPped replica = %v, want nil", err)
	}
	if alive(pid) || time.Since(start) > 10*time.Second {
		t.Errorf("Stop() with a SIGSTOPped replica took %v, pid alive %v; want it continued, drained and gone", time.Since(start), alive(pid))
	}
}

func TestStartFailureReportsTheReplicaLogAndCleansUp(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	before := children(t)
	_, err := Start(context.Background(), Options{
		Replicas: 2, Binary: binary, NoFsync: true,
		Env: map[string]string{"INVENTORY_STRATEGY": "bogus"},
	})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "INVENTORY_STRATEGY") {
		t.Fatalf("Start(INVENTORY_STRATEGY=bogus) = %v, want ErrNotReady with the replica's config error in it", err)
	}
	if after := children(t); !slices.Equal(after, before) {
		t.Errorf("child processes after a failed Start = %v, want %v as before", after, before)
	}
}

// TestStartMovesToAnotherPortWhenOneIsTaken hands every other port drawn
// to a port a listener of the test already holds, as another process can
// bind a port between FreePort's probe and a server's bind: the replicas
// and nginx that draw it fail to listen, start again on the next port, and
// the fleet serves.
func TestStartMovesToAnotherPortWhenOneIsTaken(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	go func() { // a squatter that hangs up: no readiness probe passes here
		for {
			c, err := held.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	taken := held.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	var draws, handedTaken int
	freePort = func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		draws++
		if draws%2 == 1 {
			handedTaken++
			return taken, nil
		}
		return localstack.FreePort()
	}
	t.Cleanup(func() { freePort = localstack.FreePort })

	f, err := Start(context.Background(), Options{Replicas: 2, Binary: binary, NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("Start with every other port taken: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	// Replicas draw first (two taken, two free), nginx last (taken, free).
	if draws != 6 || handedTaken != 3 {
		t.Errorf("ports drawn %d, taken ones handed out %d; want 6 and 3 (each server tried again)", draws, handedTaken)
	}
	for _, addr := range append([]string{f.Nginx.Addr}, f.Replicas[0].Addr, f.Replicas[1].Addr) {
		if addr == held.Addr().String() {
			t.Errorf("a server of the fleet is at %s, the port the test holds", addr)
		}
	}
	ctx := context.Background()
	if _, err := f.Client().Restock(ctx, "sku-port", client.RestockRequest{Quantity: 1}); err != nil {
		t.Fatalf("restock through nginx: %v", err)
	}
	if sale, err := f.Client().Sell(ctx, client.SaleRequest{ProductID: "sku-port", Quantity: 1}, client.SaleOptions{}); err != nil || sale.Remaining != 0 {
		t.Errorf("sale through nginx = %+v, %v; want sold, 0 left", sale, err)
	}
}

// TestStartWithoutItsBinaryFailsAndCleansUp: a replica that cannot even
// be launched fails Start, which stops what it had started (and the
// replicas it never launched) without a panic.
func TestStartWithoutItsBinaryFailsAndCleansUp(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	before := children(t)
	missing := filepath.Join(t.TempDir(), "no-such-inventory")
	if _, err := Start(context.Background(), Options{Replicas: 2, Binary: missing, NoFsync: true, NoLockServices: true}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Start(Binary: %s) = %v, want an error naming the binary", missing, err)
	}
	if after := children(t); !slices.Equal(after, before) {
		t.Errorf("child processes after a failed Start = %v, want %v as before", after, before)
	}
}

func TestChildEnvDropsStrayInventoryVariables(t *testing.T) {
	tests := []struct {
		parent []string
		set    map[string]string
		want   []string
	}{
		{[]string{"PATH=/bin", "INVENTORY_STRATEGY=none"}, map[string]string{"INVENTORY_ADDR": ":1"}, []string{"INVENTORY_ADDR=:1", "PATH=/bin"}},
		{[]string{"HOME=/root"}, nil, []string{"HOME=/root"}},
	}
	for _, tt := range tests {
		got := childEnv(tt.parent, tt.set)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("childEnv(%q, %v) = %q, want %q", tt.parent, tt.set, got, tt.want)
		}
	}
}

func TestKilledReplicaRestartsOnItsAddress(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx := context.Background()
	f, err := Start(ctx, Options{Replicas: 2, Binary: binary, NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	r := f.Replicas[0]
	pid := r.Pid()
	if err := r.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !r.Exited() {
		t.Fatalf("%s has not exited after Kill", r.Instance)
	}
	if _, err := f.Client().Readyz(ctx); err != nil {
		t.Errorf("nginx with one replica killed: %v, want the other to answer", err)
	}
	if err := r.Restart(ctx, 30*time.Second); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.Pid() == pid {
		t.Errorf("Restart kept pid %d, want a new process", pid)
	}
	if _, err := r.Client().Readyz(ctx); err != nil {
		t.Errorf("%s after Restart: %v", r.Instance, err)
	}
}
