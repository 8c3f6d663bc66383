package nginx

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWithLimitsSetsWhatItSetsAndTurnsOffTheRest(t *testing.T) {
	files, err := LocalFiles("127.0.0.1:1", []string{"127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	clientOn, productOn := "default $binary_remote_addr;", "default $inventory_product;"
	for _, tc := range []struct {
		limits    Limits
		want, not []string
	}{
		{Limits{}, []string{keyOff}, []string{clientOn, productOn}},
		{DefaultLimits, []string{clientKeyOn, productKeyOn, clientRate, clientBurst, productSales}, []string{keyOff}},
		{Limits{ClientRate: 7, ClientBurst: 3}, []string{clientKeyOn, "rate=7r/s;", "burst=3 nodelay;", keyOff}, []string{productOn}},
		{Limits{ProductSales: 5}, []string{productKeyOn, "limit_conn inventory_per_product 5;", keyOff}, []string{clientOn}},
	} {
		got, err := WithLimits(files, tc.limits)
		if err != nil {
			t.Fatalf("WithLimits(%+v) = %v", tc.limits, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(got["nginx.conf"], w) {
				t.Errorf("WithLimits(%+v): nginx.conf lacks %q", tc.limits, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got["nginx.conf"], n) {
				t.Errorf("WithLimits(%+v): nginx.conf still has %q", tc.limits, n)
			}
		}
		if got["upstreams.conf"] != files["upstreams.conf"] {
			t.Errorf("WithLimits(%+v) changed upstreams.conf", tc.limits)
		}
	}
	if got, _ := WithLimits(files, DefaultLimits); got["nginx.conf"] != files["nginx.conf"] {
		t.Errorf("WithLimits(DefaultLimits) changed nginx.conf: DefaultLimits and what nginx.conf ships differ")
	}
	if _, err := WithLimits(files, Limits{ClientRate: -1}); err == nil {
		t.Error("WithLimits with a negative rate = nil error, want ErrConfig")
	}
	if _, err := WithLimits(map[string]string{"nginx.conf": "events {}"}, Limits{ClientRate: 1}); err == nil {
		t.Error("WithLimits on a config without the limit lines = nil error, want ErrConfig")
	}
}

// TestConfShipsTheLimitsOn: compose mounts nginx.conf as it is, so the
// gateway limits are on there: both keys set, the numbers DefaultLimits'.
func TestConfShipsTheLimitsOn(t *testing.T) {
	for _, line := range []string{clientKeyOn, productKeyOn, clientRate, clientBurst, productSales} {
		if strings.Count(Conf, line) != 1 {
			t.Errorf("nginx.conf has %d %q, want it once: the limits on as DefaultLimits says", strings.Count(Conf, line), line)
		}
	}
	if strings.Contains(Conf, keyOff) {
		t.Errorf("nginx.conf has %q: a gateway limit ships off", keyOff)
	}
}

// TestClientRateLimit: with the per-client limit on, a client past its
// burst gets nginx's 429 problem with Retry-After, and nothing reaches the
// replicas for it; with it off the same burst all goes through, and so it
// does with DefaultLimits.
func TestClientRateLimit(t *testing.T) {
	up := startUpstream(t, "a")
	c := &http.Client{Timeout: 5 * time.Second}
	count := func(base string, n int) (ok, limited int) {
		for range n {
			req, _ := http.NewRequest("GET", base+"/products/sku-1", nil)
			a := send(t, c, req)
			switch a.status {
			case 200:
				ok++
			case 429:
				limited++
				checkNginxProblem(t, "GET /products/sku-1 past the client's burst", a, 429, "")
				if a.header.Get("Retry-After") != "1" {
					t.Errorf("429 Retry-After = %q, want 1", a.header.Get("Retry-After"))
				}
			default:
				t.Fatalf("GET /products/sku-1 = %d %s", a.status, a.body)
			}
		}
		return ok, limited
	}
	// A rate of 1/s: a burst of 5 goes through, the rest of 40 requests
	// sent at once (well within a second or two) is refused.
	before := up.requests.Load()
	ok, limited := count(startLimitedNginx(t, Limits{ClientRate: 1, ClientBurst: 5}, up.addr), 40)
	if ok < 6 || ok > 10 || limited != 40-ok {
		t.Errorf("40 requests at once with 1/s and a burst of 5 = %d through, %d refused; want the burst through (6 to a few more as the second passes), the rest 429", ok, limited)
	}
	if got := up.requests.Load() - before; got != int64(ok) {
		t.Errorf("the replicas saw %d requests, want only the %d let through", got, ok)
	}
	if ok, limited := count(startLimitedNginx(t, Limits{}, up.addr), 40); ok != 40 || limited != 0 {
		t.Errorf("40 requests at once with the limits off = %d through, %d refused; want all through", ok, limited)
	}
	if ok, limited := count(startNginx(t, up), 40); ok != 40 || limited != 0 {
		t.Errorf("40 requests at once with DefaultLimits = %d through, %d refused; want all through", ok, limited)
	}
}

// TestProductSalesLimit: with the per-product limit at 1, a second sale of
// a product on the routed path while the first is in flight gets 429; a
// sale of another product, and POST /sale (not routed by product), go
// through.
func TestProductSalesLimit(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/products/hot/sale" {
			held <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "sold")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := startLimitedNginx(t, Limits{ProductSales: 1}, l.Addr().String())
	c := &http.Client{Timeout: 10 * time.Second}
	sale := func(path string) answer {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"quantity":1}`))
		req.Header.Set("Content-Type", "application/json")
		return send(t, c, req)
	}

	var wg sync.WaitGroup
	var first answer
	wg.Go(func() { first = sale("/products/hot/sale") })
	<-held // the first sale of hot is in flight
	second := sale("/products/hot/sale")
	checkNginxProblem(t, "a second sale of hot while one is in flight", second, 429, "")
	if a := sale("/products/calm/sale"); a.status != 200 {
		t.Errorf("a sale of another product = %d %s, want 200", a.status, a.body)
	}
	if a := sale("/sale"); a.status != 200 {
		t.Errorf("POST /sale (not routed by product) = %d %s, want 200", a.status, a.body)
	}
	close(release)
	wg.Wait()
	if first.status != 200 {
		t.Errorf("the first sale of hot = %d %s, want 200", first.status, first.body)
	}
}
