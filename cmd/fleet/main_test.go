package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if strings.Contains(stdout.String(), "inventory is up at ") {
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 && strings.HasPrefix(resp.Header.Get("X-Instance"), "inventory-") {
					break
				}
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
	req, _ := http.NewRequest("PUT", base+"/products/sku-1", strings.NewReader(`{"quantity":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-admin-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT /products/sku-1 with the demo token = %v, %v; want 201", resp, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
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
