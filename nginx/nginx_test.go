package nginx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/localstack"
)

func TestLocalFilesChangesOnlyAddresses(t *testing.T) {
	tests := []struct {
		listen   string
		replicas []string
	}{
		{"127.0.0.1:18080", []string{"127.0.0.1:1", "127.0.0.1:2"}},
		{"127.0.0.1:9", []string{"127.0.0.1:3"}},
		{"127.0.0.1:9", []string{"127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}},
	}
	params := UpstreamServers(Upstreams)[0].Params
	for _, tt := range tests {
		files, err := LocalFiles(tt.listen, tt.replicas)
		if err != nil {
			t.Fatalf("LocalFiles(%q, %q) = %v", tt.listen, tt.replicas, err)
		}
		want := strings.Replace(Conf, "        "+ComposeListen+"\n", "        listen "+tt.listen+";\n", 1)
		if files["nginx.conf"] != want || files["nginx.conf"] == Conf {
			t.Errorf("LocalFiles(%q, %q) nginx.conf differs from Conf by more than the listen line", tt.listen, tt.replicas)
		}
		got := UpstreamServers(files["upstreams.conf"])
		if len(got) != len(tt.replicas) {
			t.Fatalf("LocalFiles(%q, %q) upstreams.conf has %d servers, want %d:\n%s", tt.listen, tt.replicas, len(got), len(tt.replicas), files["upstreams.conf"])
		}
		for i, s := range got {
			if s.Addr != tt.replicas[i] || s.Params != params {
				t.Errorf("LocalFiles(%q, %q) server %d = %+v, want {%s %q}", tt.listen, tt.replicas, i, s, tt.replicas[i], params)
			}
		}
	}
	if _, err := LocalFiles("127.0.0.1:1", nil); err == nil {
		t.Errorf("LocalFiles with no replicas = nil error, want ErrConfig")
	}
}

func TestConfKeepsTheSafetyRules(t *testing.T) {
	directives := regexp.MustCompile(`(?m)^\s*([a-z_]+)\s+([^;{]*)[;{]`)
	found := map[string][]string{}
	for _, m := range directives.FindAllStringSubmatch(Conf, -1) {
		found[m[1]] = append(found[m[1]], strings.TrimSpace(m[2]))
	}
	for _, v := range found["proxy_next_upstream"] {
		if strings.Contains(v, "non_idempotent") {
			t.Errorf("proxy_next_upstream %s: must never retry non-idempotent requests (a resent POST /sale can sell twice)", v)
		}
	}
	checks := []struct{ directive, want string }{
		{"proxy_http_version", "1.1"},
		{"proxy_set_header", `Connection ""`},
		{"proxy_set_header", "X-Request-ID $inventory_request_id"},
		{"keepalive", "256"},
		{"include", "upstreams.conf"},
	}
	for _, c := range checks {
		ok := false
		for _, v := range found[c.directive] {
			ok = ok || v == c.want
		}
		if !ok {
			t.Errorf("nginx.conf has no %q directive with %q (found %q)", c.directive, c.want, found[c.directive])
		}
	}
}

// upstream is a tiny HTTP server that records what nginx sends it.
type upstream struct {
	addr     string
	requests atomic.Int64
	newConns atomic.Int64
	mu       sync.Mutex
	ids      []string
}

func startUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	u := &upstream{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.requests.Add(1)
			u.mu.Lock()
			u.ids = append(u.ids, r.Header.Get("X-Request-ID"))
			u.mu.Unlock()
			_, _ = io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/die" { // answer nothing: nginx sees the upstream close the connection
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = c.Close()
				}
				return
			}
			w.Header().Set("X-Instance", name)
			_, _ = io.WriteString(w, name)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				u.newConns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

func (u *upstream) lastID() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.ids) == 0 {
		return ""
	}
	return u.ids[len(u.ids)-1]
}

// startNginx runs this directory's nginx.conf in front of ups, as the local fleet does.
func startNginx(t *testing.T, ups ...*upstream) string {
	t.Helper()
	var addrs []string
	for _, u := range ups {
		addrs = append(addrs, u.addr)
	}
	return startNginxAt(t, addrs...)
}

// startNginxAt runs this directory's nginx.conf as it ships (its gateway
// limits DefaultLimits) with upstream servers addrs, which need not answer.
func startNginxAt(t *testing.T, addrs ...string) string {
	t.Helper()
	return startLimitedNginx(t, DefaultLimits, addrs...)
}

// startLimitedNginx is startNginxAt with the gateway limits l (a zero
// field off).
func startLimitedNginx(t *testing.T, l Limits, addrs ...string) string {
	t.Helper()
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	files, err := LocalFiles(listen, addrs)
	if err != nil {
		t.Fatalf("LocalFiles: %v", err)
	}
	if files, err = WithLimits(files, l); err != nil {
		t.Fatalf("WithLimits(%+v): %v", l, err)
	}
	n, err := localstack.StartNginx(context.Background(), listen, files)
	if err != nil {
		t.Fatalf("StartNginx with nginx/nginx.conf: %v", err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	return "http://" + listen
}

// do sends a request by hand, not through internal/client: these tests are
// about nginx (its headers, connections and own answers) in front of
// stand-in upstreams, not about the API.
func do(t *testing.T, c *http.Client, method, url, requestID string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"product_id":"sku-1","quantity":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if requestID != "" {
		req.Header.Set("X-Request-ID", requestID)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s through nginx: %v", method, url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestNginxRoundRobinsAndKeepsUpstreamConnections(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	base := startNginx(t, a, b)
	c := &http.Client{Timeout: 5 * time.Second}
	const n = 200
	seen := map[string]int{}
	for range n {
		resp, body := do(t, c, "POST", base+"/sale", "")
		if resp.StatusCode != 200 {
			t.Fatalf("POST /sale through nginx = %d %q, want 200", resp.StatusCode, body)
		}
		seen[resp.Header.Get("X-Instance")]++
	}
	if seen["a"] < n/4 || seen["b"] < n/4 {
		t.Errorf("%d POSTs through nginx reached a %d and b %d times, want round robin over both", n, seen["a"], seen["b"])
	}
	// One new upstream connection per request would mean no keepalive; a
	// handful per worker is fine.
	if conns := a.newConns.Load() + b.newConns.Load(); conns > 20 {
		t.Errorf("%d requests opened %d upstream connections, want upstream keepalive (≤ 20)", n, conns)
	}
}

func TestNginxPassesOrCreatesRequestID(t *testing.T) {
	a := startUpstream(t, "a")
	base := startNginx(t, a)
	c := &http.Client{Timeout: 5 * time.Second}

	resp, _ := do(t, c, "POST", base+"/sale", "req-from-client-42")
	if got := a.lastID(); got != "req-from-client-42" {
		t.Errorf("upstream saw X-Request-ID %q, want the client's req-from-client-42", got)
	}
	if got := resp.Header.Get("X-Request-ID"); got != "req-from-client-42" {
		t.Errorf("response X-Request-ID = %q, want req-from-client-42", got)
	}

	resp, _ = do(t, c, "POST", base+"/sale", "")
	got := a.lastID()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got) {
		t.Errorf("without a client id, upstream saw X-Request-ID %q, want nginx's 32-hex $request_id", got)
	}
	if resp.Header.Get("X-Request-ID") != got {
		t.Errorf("response X-Request-ID = %q, want the id the upstream saw, %q", resp.Header.Get("X-Request-ID"), got)
	}
}

func TestNginxNeverResendsAPost(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	base := startNginx(t, a, b)
	c := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		method string
		want   int64 // upstream attempts for one request whose upstream dies mid-request
	}{
		{"POST", 1}, // non-idempotent: a resent sale could sell twice
		{"GET", 2},  // idempotent: nginx tries the other replica (proves the test can tell)
	}
	for _, tt := range tests {
		before := a.requests.Load() + b.requests.Load()
		resp, body := do(t, c, tt.method, base+"/die", "")
		attempts := a.requests.Load() + b.requests.Load() - before
		if attempts != tt.want {
			t.Errorf("%s /die (upstream closes mid-request) reached upstreams %d times, want %d", tt.method, attempts, tt.want)
		}
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s /die = %d %q, want 502", tt.method, resp.StatusCode, body)
		}
	}
}
