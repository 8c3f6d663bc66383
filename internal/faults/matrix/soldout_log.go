package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"
)

// soldOutLog stands between the matrix's buyers and nginx and notes when
// each sale answered 409 sold-out was sent, by product: what tells a
// sold-out answered while the fault was active from one answered after it
// healed (see verdict.SoldOutAfterHeal). It passes everything through
// untouched.
type soldOutLog struct {
	URL string // where buyers send their requests instead of nginx

	srv *http.Server
	mu  sync.Mutex
	// sent is, by product, when each sale answered 409 was sent.
	sent map[string][]time.Time
}

// startSoldOutLog starts a soldOutLog in front of target (nginx's URL).
func startSoldOutLog(target string) (*soldOutLog, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("sold-out log: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sold-out log: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	// A buyer that gives up cancels its request: the proxy answers it 502,
	// which nobody reads; it need not say so on stderr.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	l := &soldOutLog{URL: "http://" + ln.Addr().String(), sent: map[string][]time.Time{}}
	l.srv = &http.Server{Handler: l.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

func (l *soldOutLog) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		product, ok := saleProduct(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		sent := time.Now()
		sw := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(sw, r)
		if sw.Status() == http.StatusConflict {
			l.mu.Lock()
			l.sent[product] = append(l.sent[product], sent)
			l.mu.Unlock()
		}
	})
}

// saleProduct returns the product of a sale request (POST /sale, its id
// in the body, or POST /products/{id}/sale), restoring the body it read.
func saleProduct(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/products/"); ok {
		id, ok = strings.CutSuffix(id, "/sale")
		return id, ok && !strings.Contains(id, "/")
	}
	if r.URL.Path != "/sale" {
		return "", false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", false
	}
	var b struct {
		ProductID string `json:"product_id"`
	}
	if json.Unmarshal(body, &b) != nil || b.ProductID == "" {
		return "", false
	}
	return b.ProductID, true
}

// take returns, and forgets, when product's sales answered 409 were sent.
func (l *soldOutLog) take(product string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent[product]
	delete(l.sent, product)
	return out
}

// Close stops it.
func (l *soldOutLog) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
