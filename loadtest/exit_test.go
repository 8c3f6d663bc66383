package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeFleet speaks the inventory API with strategies whose behaviour is
// fixed, so the load tester's verdicts and exit status can be checked
// against known outcomes. The real service is exercised in e2e_test.go.
type fakeFleet struct {
	mu                               sync.Mutex
	qty, initial, sold, sales, round int64
}

func (f *fakeFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("X-Instance", "fake-1")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/strategies":
		_, _ = w.Write([]byte(`[{"name":"honest","safe":true},{"name":"oversells","safe":true},{"name":"busy","safe":true},{"name":"racy","safe":false}]`))
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/products/"):
		if r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var body struct{ Quantity int64 }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.qty, f.initial, f.sold, f.sales = body.Quantity, body.Quantity, 0, 0
		f.round++
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/products/"):
		_ = json.NewEncoder(w).Encode(map[string]int64{"quantity": f.qty, "initial": f.initial, "sold": f.sold, "sales": f.sales, "round": f.round})
	case r.Method == http.MethodPost && r.URL.Path == "/sale":
		switch s := r.URL.Query().Get("strategy"); {
		case s == "busy":
			http.Error(w, "lock wait timed out", http.StatusServiceUnavailable)
		case s == "honest" && f.qty < 1:
			http.Error(w, "sold out", http.StatusConflict)
		case s == "racy" && f.qty < 1 && f.sold%2 == 0: // oversells every other time once sold out
			http.Error(w, "sold out", http.StatusConflict)
		default: // "oversells" never checks
			f.qty--
			f.sold++
			f.sales++
		}
	default:
		http.NotFound(w, r)
	}
}

func TestRunVerdictsAndExitStatus(t *testing.T) {
	tests := []struct {
		strategy    string
		wantErr     error
		wantVerdict string
	}{
		{"honest", nil, VerdictSafe},
		{"oversells", errBroken, VerdictBroken},
		{"busy", nil, VerdictUndersold}, // reported, but a capacity limit does not fail the run
		{"racy", nil, VerdictOversold},  // unsafe strategies are expected to oversell
	}
	srv := httptest.NewServer(&fakeFleet{})
	defer srv.Close()
	for _, tt := range tests {
		args := []string{"--url", srv.URL, "--admin-token", "t", "--stock", "5", "--buyers", "9", "--concurrency", "3", "--strategies", tt.strategy, "--json", "-"}
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("run(%q) = %v, want %v", args, err, tt.wantErr)
		}
		var rep Report
		if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil || len(rep.Results) != 1 {
			t.Fatalf("run(%q) JSON = %v, %s", args, jerr, stdout.String())
		}
		if got := rep.Results[0].Verdict; got != tt.wantVerdict || !strings.Contains(stderr.String(), tt.wantVerdict) {
			t.Errorf("run(%q) verdict %s, want %s in the JSON and the table:\n%s", args, got, tt.wantVerdict, stderr.String())
		}
		if rep.Failed != (tt.wantErr != nil) {
			t.Errorf("run(%q) report.failed = %v, want %v", args, rep.Failed, tt.wantErr != nil)
		}
	}
}

func TestRunExplainsAWrongAdminToken(t *testing.T) {
	srv := httptest.NewServer(&fakeFleet{})
	defer srv.Close()
	args := []string{"--url", srv.URL, "--admin-token", "wrong", "--strategies", "honest"}
	err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "--admin-token") {
		t.Errorf("run(%q) = %v, want a 401 that points at --admin-token", args, err)
	}
	args = []string{"--url", srv.URL, "--admin-token", "t", "--strategies", "honest,nope"}
	if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "honest, oversells, busy, racy") {
		t.Errorf("run(%q) = %v, want errUsage listing the fleet's strategies", args, err)
	}
}
