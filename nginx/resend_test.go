package nginx

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// resetOnce is one of two stand-in replicas (plain listeners, no net/http
// server) that share a record of the requests they saw, by X-Request-ID:
// the first copy of a request to reach either is read whole and then
// answered with a TCP reset, as a replica that commits and dies before
// answering; a copy that arrives after that (nginx resending it) is
// answered 200 by whichever replica it reaches.
type resetOnce struct {
	name   string
	addr   string
	shared *seen
}

// seen counts what each replica received, by request id.
type seen struct {
	mu       sync.Mutex
	arrivals map[string][]string // request id → the replicas it reached, in order
}

// arrive records that replica got request id and reports whether it is
// the request's first arrival anywhere.
func (s *seen) arrive(id, replica string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals[id] = append(s.arrivals[id], replica)
	return len(s.arrivals[id]) == 1
}

func (s *seen) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.arrivals[id]...)
}

func startResetOnce(t *testing.T, name string, shared *seen) *resetOnce {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	u := &resetOnce{name: name, addr: l.Addr().String(), shared: shared}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

// serve answers the requests of one of nginx's (keepalive) connections.
func (u *resetOnce) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body) // the whole request, body and all
		_ = req.Body.Close()
		if u.shared.arrive(req.Header.Get("X-Request-ID"), u.name) {
			_ = c.(*net.TCPConn).SetLinger(0) // Close sends a reset
			return
		}
		body := u.name
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nX-Instance: %s\r\n\r\n%s", len(body), u.name, body); err != nil {
			return
		}
	}
}

// TestNginxNeverResendsWhatTheServiceCannotTakeTwice: when the replica
// that got a request whole resets the connection before answering (it
// committed and died), nginx passes a GET or HEAD on to the other replica,
// and nothing else: a PUT /products/{id} resent would start a second round
// and put back the units sold in between, and no other write may be sent
// twice either. Each case runs on a fresh pair of replicas and nginx, so
// that no earlier reset has marked a replica down.
func TestNginxNeverResendsWhatTheServiceCannotTakeTwice(t *testing.T) {
	tests := []struct {
		method, path string
		resent       bool
	}{
		{"PUT", "/products/sku-1", false}, // a restock: a new round each time
		{"PUT", "/strategy", false},
		{"POST", "/sale", false},
		{"POST", "/products/sku-1/sale", false},
		{"POST", "/products/sku-1/circuit", false},
		{"DELETE", "/products/sku-1", false},
		{"PATCH", "/products/sku-1", false},
		{"GET", "/products/sku-1", true}, // a read fails over (proves the test can tell)
		{"GET", "/strategy", true},
		{"HEAD", "/products/sku-1", true},
	}
	c := &http.Client{Timeout: 10 * time.Second}
	for i, tt := range tests {
		shared := &seen{arrivals: map[string][]string{}}
		a, b := startResetOnce(t, "a", shared), startResetOnce(t, "b", shared)
		base := startNginxAt(t, a.addr, b.addr)
		id := fmt.Sprintf("resend-%d", i)
		var body io.Reader
		if tt.method != "GET" && tt.method != "HEAD" {
			body = strings.NewReader(`{"quantity":100}`)
		}
		req, err := http.NewRequest(tt.method, base+tt.path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", id)
		ans := send(t, c, req)
		got := shared.of(id)
		count := map[string]int{}
		for _, r := range got {
			count[r]++
		}
		call := tt.method + " " + tt.path
		switch {
		case tt.resent && (len(got) != 2 || count["a"] != 1 || count["b"] != 1 || ans.status != 200):
			t.Errorf("%s whose first replica reset after reading it reached %v and answered %d; want it resent to the other replica, once each, 200", call, got, ans.status)
		case !tt.resent && (len(got) != 1 || ans.status != http.StatusBadGateway):
			t.Errorf("%s whose replica reset after reading it reached %v (a %d, b %d) and answered %d; want one replica only and 502, the other receiving nothing", call, got, count["a"], count["b"], ans.status)
		case !tt.resent && tt.method != "HEAD":
			checkNginxProblem(t, call+" after a reset", ans, http.StatusBadGateway, id)
		}
	}
}
