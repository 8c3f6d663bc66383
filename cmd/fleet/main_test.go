package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"inventory/internal/client"
	"inventory/internal/localstack"

	"inventory/internal/testenv"
)

func TestRunServesThroughNginxUntilCancelled(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout localstack.LogBuffer // written by run's goroutine while the test reads it
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:" + strconv.Itoa(port)}, &stdout, io.Discard) }()

	// Up means run has said so (every part of the fleet checked), not merely
	// that nginx answers: cancelling before that is a failed start.
	admin := client.New(base, client.Options{AdminToken: "demo-admin-token", HTTPClient: http.DefaultClient})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if strings.Contains(stdout.String(), "inventory is up at ") {
			if h, err := admin.Healthz(ctx); err == nil && strings.HasPrefix(h.Instance, "inventory-") {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before the fleet answered: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer through nginx at %s within 2 minutes", base)
		}
	}
	if p, err := admin.Restock(ctx, "sku-1", client.RestockRequest{Quantity: 1}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-1 with the demo token = %+v, %v; want it created", p, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	if _, err := admin.Healthz(context.Background()); err == nil {
		t.Errorf("%s still answers after run returned", base)
	}
	if !strings.Contains(stdout.String(), "inventory is up at "+base) {
		t.Errorf("stdout = %q, want it to name %s", stdout.String(), base)
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--replicas", "0"}, {"--work-delay", "-1s"}, {"extra"}, {"--nope"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
