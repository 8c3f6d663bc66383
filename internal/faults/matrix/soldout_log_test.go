package matrix

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSoldOutLogNotesWhenEachSoldOutWasSent: between the buyers and the
// fleet, the log passes requests and answers through untouched and notes,
// per product, when each sale answered 409 was sent (by body or by path),
// and nothing else.
func TestSoldOutLogNotesWhenEachSoldOutWasSent(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "gone") || strings.Contains(r.URL.Path, "gone") {
			w.WriteHeader(http.StatusConflict)
		}
		w.Write(body) // echo: the body must pass through intact
	}))
	defer backend.Close()
	l, err := startSoldOutLog(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	begun := time.Now()
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(l.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		path, body string
		status     int
	}{
		{"/sale", `{"product_id":"gone","quantity":1}`, http.StatusConflict},
		{"/sale", `{"product_id":"here","quantity":1}`, http.StatusOK},
		{"/products/gone/sale", `{"quantity":1}`, http.StatusConflict},
		{"/products/here/sale", `{"quantity":1}`, http.StatusOK},
	} {
		if status, body := post(tt.path, tt.body); status != tt.status || body != tt.body {
			t.Errorf("POST %s %s through the log = %d %q, want %d and the body echoed", tt.path, tt.body, status, body, tt.status)
		}
	}
	got := l.take("gone")
	if len(got) != 2 || got[0].Before(begun) || got[1].Before(got[0]) {
		t.Errorf("take(gone) = %v, want 2 times after %v, in order", got, begun)
	}
	if got := l.take("here"); len(got) != 0 {
		t.Errorf("take(here) = %v, want none (no 409)", got)
	}
	if got := l.take("gone"); len(got) != 0 {
		t.Errorf("take(gone) again = %v, want none (taken)", got)
	}
}
