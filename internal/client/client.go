package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"inventory/internal/wire"
)

// Options configures a Client. The zero value works: no admin token, a
// keep-alive pool for 50 calls at once.
type Options struct {
	// AdminToken is the bearer token sent with admin calls
	// (INVENTORY_ADMIN_TOKEN). Empty sends none, and the service refuses
	// them: 401, or 403 when its admin calls are disabled.
	AdminToken string
	// HTTPClient sends every request. Nil means one of the Client's own:
	// a timeout of 60 s (longer than the service's lock wait and nginx's
	// read timeout, so that those answer first), a keep-alive pool of
	// 2 × Concurrency idle connections per host, no compression.
	HTTPClient *http.Client
	// Concurrency is how many calls the caller makes at once at most (the
	// load tester's buyers): it sizes the pool of the default HTTPClient.
	// Default 50.
	Concurrency int
	// LocalAddrs, when set, are the source addresses the default
	// HTTPClient sends from, each request from the next in turn, over
	// connections of its own (see LoopbackSources): to a gateway that
	// limits each client address (nginx's limit_req on
	// $binary_remote_addr) the caller looks like len(LocalAddrs) clients
	// sharing its requests evenly. Default nil: the system picks, as for
	// any dial, and the caller is one client.
	LocalAddrs []netip.Addr
}

// Client calls one base URL: nginx in front of the fleet, or one replica.
type Client struct {
	base    string
	http    *http.Client
	auth    []string // the Authorization header of admin calls; nil without a token
	saleURL string
}

// New returns a client of the API at baseURL, e.g. "http://127.0.0.1:8080".
func New(baseURL string, opts Options) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: opts.HTTPClient}
	c.saleURL = c.base + "/sale"
	if opts.AdminToken != "" {
		c.auth = []string{"Bearer " + opts.AdminToken}
	}
	if c.http == nil {
		conns := opts.Concurrency
		if conns <= 0 {
			conns = 50
		}
		// http.DefaultTransport's settings, but not it: a test may have
		// replaced it with a RoundTripper of its own.
		transport := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
			return &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           dial,
				ForceAttemptHTTP2:     true,
				MaxIdleConns:          2 * conns,
				MaxIdleConnsPerHost:   2 * conns,
				IdleConnTimeout:       90 * time.Second,
				TLSHandshakeTimeout:   10 * time.Second,
				ExpectContinueTimeout: time.Second,
				DisableCompression:    true,
			}
		}
		var rt http.RoundTripper = transport((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
		if len(opts.LocalAddrs) > 0 {
			var each rotating
			for _, a := range opts.LocalAddrs {
				d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: a.AsSlice()}}
				each.transports = append(each.transports, transport(d.DialContext))
			}
			rt = &each
		}
		c.http = &http.Client{Transport: rt, Timeout: 60 * time.Second}
	}
	return c
}

// rotating sends each request through the next of its transports in
// turn, each dialling from its own local address: one client per address,
// each with its share of the requests (one transport's pool reuses its
// most recent idle connection first, which would put most requests on a
// few addresses).
type rotating struct {
	transports []*http.Transport
	next       atomic.Uint64
}

func (r *rotating) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.transports[(r.next.Add(1)-1)%uint64(len(r.transports))].RoundTrip(req)
}

// CloseIdleConnections closes every transport's idle connections.
func (r *rotating) CloseIdleConnections() {
	for _, t := range r.transports {
		t.CloseIdleConnections()
	}
}

// LoopbackSources returns n loopback addresses from 127.0.0.2 up
// (127.0.0.2, 127.0.0.3, …, 127.0.1.0, …), for Options.LocalAddrs: on
// Linux the whole of 127.0.0.0/8 answers on the loopback interface, so a
// client on the same machine as the gateway can be n clients to it
// without configuring any address. n is at most 65534.
func LoopbackSources(n int) ([]netip.Addr, error) {
	if n < 1 || n > MaxLoopbackSources {
		return nil, fmt.Errorf("want from 1 to %d loopback source addresses, got %d", MaxLoopbackSources, n)
	}
	addrs := make([]netip.Addr, 0, n)
	a := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	for range n {
		a = a.Next()
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// MaxLoopbackSources is the most addresses LoopbackSources hands out.
const MaxLoopbackSources = 65534

// BaseURL is the URL the client calls.
func (c *Client) BaseURL() string { return c.base }

// CloseIdleConnections closes the keep-alive connections not in use.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// ErrMalformedAnswer is wrapped by the error of a call whose answer was a
// 2xx but whose body is not what the operation documents: the call
// succeeded (a sale was made), yet its answer cannot be read.
var ErrMalformedAnswer = errors.New("malformed answer")

// Header values shared by every request; the transport does not change them.
var jsonContentType = []string{"application/json"}

const (
	// maxAnswer bounds a body read whole: holds of a busy product run to
	// megabytes.
	maxAnswer = 64 << 20
	// maxDrain is how much of an unread body is read to keep its
	// connection; a longer one is closed.
	maxDrain = 256 << 10
)

// send sends one request. body is its JSON body, or nil for none; admin
// sends the admin token; key is an Idempotency-Key, or empty. A transport
// error comes back as net/http's *url.Error, which names the method and
// URL.
func (c *Client) send(ctx context.Context, method, target string, admin bool, body *requestBody, key string) (*http.Response, error) {
	return c.sendWith(ctx, method, target, admin, body, preconditions{key: key})
}

// preconditions are the headers that make a write safe to send again: an
// Idempotency-Key and an If-Match, each "" for none; and, for a read, that
// it must be exact (Cache-Control: no-cache).
type preconditions struct {
	key, ifMatch string
	exact        bool
}

// noCache is the Cache-Control of an exact read.
var noCache = []string{"no-cache"}

// sendWith is send with an If-Match as well.
func (c *Client) sendWith(ctx context.Context, method, target string, admin bool, body *requestBody, pre preconditions) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	if body != nil {
		body.r.Reset(body.b)
		// A NopCloser of a *bytes.Reader: net/http then writes the headers
		// and the body in one go (any other reader costs a write of its own).
		req.Body, req.ContentLength = io.NopCloser(&body.r), int64(len(body.b))
		// GetBody lets the transport send a PUT or a keyed sale again on a
		// fresh connection when a kept-alive one turns out dead; it never
		// sends a POST without a key twice, so those are spared the
		// allocation.
		if pre.key != "" || method != http.MethodPost {
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body.b)), nil }
		}
		req.Header["Content-Type"] = jsonContentType
	}
	if admin && c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	if pre.key != "" {
		req.Header["Idempotency-Key"] = []string{pre.key}
	}
	if pre.ifMatch != "" {
		req.Header["If-Match"] = []string{pre.ifMatch}
	}
	if pre.exact {
		req.Header["Cache-Control"] = noCache
	}
	return c.http.Do(req)
}

// requestBody is a request's body and its reader in one allocation: a
// sale's fits in arr.
type requestBody struct {
	b   []byte
	r   bytes.Reader
	arr [112]byte
}

// buffers hold answers while they are read; most are a few hundred bytes.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// readBody reads resp's body (at most limit bytes) into *buf, growing it
// as needed, and closes it, keeping the connection when the rest is short.
func readBody(resp *http.Response, buf *[]byte, limit int) ([]byte, error) {
	b := (*buf)[:0]
	var err error
	for len(b) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		var n int
		n, err = resp.Body.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		if err != nil {
			break
		}
	}
	*buf = b
	if err == io.EOF {
		err = nil
	} else if err == nil {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	}
	_ = resp.Body.Close()
	return b, err
}

func putBuffer(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		buffers.Put(buf)
	}
}

// call sends a request to path and decodes a 2xx answer into out (when
// not nil); any other answer is a *Problem. in, when not nil, is sent as
// the JSON body.
func (c *Client) call(ctx context.Context, method, path string, admin bool, in, out any) error {
	return c.callWith(ctx, method, path, admin, preconditions{}, in, out)
}

// callWith is call with the headers pre.
func (c *Client) callWith(ctx context.Context, method, path string, admin bool, pre preconditions, in, out any) error {
	buf := buffers.Get().(*[]byte)
	defer putBuffer(buf)
	b, err := c.exchange(ctx, method, path, admin, pre, in, buf)
	if err != nil || out == nil {
		return err
	}
	// The load tester's /healthz ceiling is set against sold-out answers,
	// read by the scanner: it reads health the same way.
	if h, ok := out.(*Health); ok && wire.ScanHealth(string(b), h) {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w: %v: %.300q", method, path, ErrMalformedAnswer, err, b)
	}
	return nil
}

// raw is call, returning the body of a 2xx answer as it came.
func (c *Client) raw(ctx context.Context, method, path string, admin bool) ([]byte, error) {
	buf := buffers.Get().(*[]byte)
	defer putBuffer(buf)
	b, err := c.exchange(ctx, method, path, admin, preconditions{}, nil, buf)
	return bytes.Clone(b), err
}

// exchange sends a request to path, in as its JSON body when not nil, and
// reads the answer into buf: the body of a 2xx, else a *Problem.
func (c *Client) exchange(ctx context.Context, method, path string, admin bool, pre preconditions, in any, buf *[]byte) ([]byte, error) {
	var body *requestBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = &requestBody{b: b}
	}
	resp, err := c.sendWith(ctx, method, c.base+path, admin, body, pre)
	if err != nil {
		return nil, err
	}
	b, err := readBody(resp, buf, maxAnswer)
	if resp.StatusCode/100 != 2 {
		return nil, newProblem(method, path, resp, string(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s = %s: read the answer: %w", method, path, resp.Status, err)
	}
	return b, nil
}

// productPath is /products/{id}.
func productPath(id string) string { return "/products/" + url.PathEscape(id) }

// Product is GET /products/{id}: the product's stock in its current
// round, exact. It asks for no cached answer (Cache-Control: no-cache), as
// a reader that checks the stock must (the load tester's verdicts, the
// fault runner); ProductCached reads as the crowd does.
func (c *Client) Product(ctx context.Context, id string) (Product, error) {
	var p Product
	err := c.callWith(ctx, http.MethodGet, productPath(id), false, preconditions{exact: true}, nil, &p)
	return p, err
}

// ProductCached is GET /products/{id} as anyone reads it: from the
// replicas' shared cache, as it was up to INVENTORY_PRODUCT_CACHE_TTL ago.
func (c *Client) ProductCached(ctx context.Context, id string) (Product, error) {
	var p Product
	err := c.call(ctx, http.MethodGet, productPath(id), false, nil, &p)
	return p, err
}

// Restock is PUT /products/{id} (admin): it creates the product (round 1)
// or restocks it, starting a new round, and returns the product as it now
// is. It always sends an Idempotency-Key (r's, or a fresh one), so that a
// copy sent again by the transport on a dead kept-alive connection starts
// no second round; a caller that retries after an error passes its own
// key, or r.IfRound, and the retry is safe too.
func (c *Client) Restock(ctx context.Context, id string, r RestockRequest) (Product, error) {
	pre := preconditions{key: cmp.Or(r.IdempotencyKey, uuid.NewString())}
	if r.IfRound > 0 {
		pre.ifMatch = `"` + strconv.FormatInt(r.IfRound, 10) + `"`
	}
	var p Product
	err := c.callWith(ctx, http.MethodPut, productPath(id), true, pre, r, &p)
	return p, err
}

// Round is GET /products/{id}/rounds/{round}: one round, current or past.
func (c *Client) Round(ctx context.Context, id string, round int64) (Round, error) {
	var r Round
	err := c.call(ctx, http.MethodGet, productPath(id)+"/rounds/"+strconv.FormatInt(round, 10), false, nil, &r)
	return r, err
}

// Holds is GET /products/{id}/holds (admin): the lock holds of the product
// that the replica answering recorded. Ask each replica directly to see
// them all.
func (c *Client) Holds(ctx context.Context, id string) (Holds, error) {
	var h Holds
	err := c.call(ctx, http.MethodGet, productPath(id)+"/holds", true, nil, &h)
	return h, err
}

// orderPath is /orders/{id}.
func orderPath(id string) string { return "/orders/" + url.PathEscape(id) }

// Order is GET /orders/{id}: the order (of a hold, HeldSale.OrderID), its
// state and its history.
func (c *Client) Order(ctx context.Context, id string) (Order, error) {
	var o Order
	err := c.call(ctx, http.MethodGet, orderPath(id), false, nil, &o)
	return o, err
}

// Pay is POST /orders/{id}/pay: held → paid, before the order's deadline.
// It returns the order after it; a payment after the deadline is a 409
// order-expired *Problem, of an order in another state (cancelled,
// refunded) a 409 order-state, each with the order's state (Problem.State).
// Every step is idempotent: a repeat answers the order as it is, so a step
// whose answer was lost (no answer, a 5xx) is safe to send again as it is.
func (c *Client) Pay(ctx context.Context, id string) (Order, error) {
	return c.step(ctx, id, "pay")
}

// Cancel is POST /orders/{id}/cancel: held → cancelled, its units back in
// the stock once; otherwise as Pay.
func (c *Client) Cancel(ctx context.Context, id string) (Order, error) {
	return c.step(ctx, id, "cancel")
}

// Refund is POST /orders/{id}/refund: paid → refunded, its units back in
// the stock once; otherwise as Pay.
func (c *Client) Refund(ctx context.Context, id string) (Order, error) {
	return c.step(ctx, id, "refund")
}

// Ship is POST /orders/{id}/ship: paid → shipped, after which no refund;
// otherwise as Pay.
func (c *Client) Ship(ctx context.Context, id string) (Order, error) {
	return c.step(ctx, id, "ship")
}

// step is POST /orders/{id}/{step}, with no body.
func (c *Client) step(ctx context.Context, id, step string) (Order, error) {
	var o Order
	err := c.call(ctx, http.MethodPost, orderPath(id)+"/"+step, false, nil, &o)
	return o, err
}

// Strategies is GET /strategies: every strategy, unsafe ones first.
func (c *Client) Strategies(ctx context.Context) ([]StrategyInfo, error) {
	var list []StrategyInfo
	err := c.call(ctx, http.MethodGet, "/strategies", false, nil, &list)
	return list, err
}

// Strategy is GET /strategy: the fleet default.
func (c *Client) Strategy(ctx context.Context) (string, error) {
	var s wire.StrategyChoice
	err := c.call(ctx, http.MethodGet, "/strategy", false, nil, &s)
	return s.Strategy, err
}

// SetStrategy is PUT /strategy (admin): it switches the fleet default and
// returns once every replica sells with it.
func (c *Client) SetStrategy(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPut, "/strategy", true, wire.StrategyChoice{Strategy: name}, nil)
}

// Healthz is GET /healthz: liveness.
func (c *Client) Healthz(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, http.MethodGet, "/healthz", false, nil, &h)
	return h, err
}

// Readyz is GET /readyz: readiness (Postgres and Redis answer); not ready
// is a *Problem.
func (c *Client) Readyz(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, http.MethodGet, "/readyz", false, nil, &h)
	return h, err
}

// Live is GET /live?since=: what the live page shows, with the sales after
// ledger id since (the previous answer's LastSaleID). A negative since
// asks without it, and SalesSince comes back empty.
func (c *Client) Live(ctx context.Context, since int64) (Live, error) {
	path := "/live"
	if since >= 0 {
		path += "?since=" + strconv.FormatInt(since, 10)
	}
	var l Live
	err := c.call(ctx, http.MethodGet, path, false, nil, &l)
	return l, err
}

// Metrics is GET /metrics: the replica's metrics in Prometheus's text
// format.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, http.MethodGet, "/metrics", false)
}

// OpenAPI is GET /openapi.yaml: the description of the API, as YAML.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, http.MethodGet, "/openapi.yaml", false)
}

// Profile is GET /debug/pprof/{name} (admin): one of Go's profiles of the
// replica answering, e.g. "heap" or "goroutine"; seconds, when above 0,
// is how long "profile" and "trace" sample.
func (c *Client) Profile(ctx context.Context, name string, seconds int) ([]byte, error) {
	path := "/debug/pprof/" + url.PathEscape(name)
	if seconds > 0 {
		path += "?seconds=" + strconv.Itoa(seconds)
	}
	return c.raw(ctx, http.MethodGet, path, true)
}
