package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestBuyersComeFromTheClientSources: with --client-ips' sources, the
// buyers' connections reach the fleet from those addresses (as nginx's
// $binary_remote_addr sees them), and a fleet elsewhere is refused.
func TestBuyersComeFromTheClientSources(t *testing.T) {
	var mu sync.Mutex
	from := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.RemoteAddr, ":")
		mu.Lock()
		from[host] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sale_id":1,"product_id":"p","quantity":1,"remaining":5,"round":1}`)
	}))
	defer srv.Close()
	sources, err := ClientSources(4, srv.URL)
	if err != nil {
		t.Fatalf("ClientSources(4, %s): %v", srv.URL, err)
	}
	c := NewClient(srv.URL, "", 1, sources)
	defer c.Close()
	for range 4 {
		if o := c.buy(context.Background(), "p", "", ""); o.status != http.StatusOK {
			t.Fatalf("buy = %+v, want 200", o)
		}
	}
	for _, want := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		if !from[want] {
			t.Errorf("no buyer came from %s; they came from %v", want, from)
		}
	}

	for _, tc := range []struct {
		n       int
		target  string
		wantErr bool
	}{
		{0, "http://shop.example", false},
		{2, "", false},
		{2, "http://localhost:8080", false},
		{2, "http://[::1]:8080", false},
		{2, "http://shop.example", true},
		{2, "http://10.0.0.7:8080", true},
		{-1, "", true},
	} {
		if _, err := ClientSources(tc.n, tc.target); (err != nil) != tc.wantErr {
			t.Errorf("ClientSources(%d, %q) = %v, want error %v", tc.n, tc.target, err, tc.wantErr)
		}
	}
}
