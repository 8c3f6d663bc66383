package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client speaks the inventory HTTP API, as any outside caller would.
type client struct {
	base       string
	adminToken string
	http       *http.Client
	// byProduct sends sales as POST /products/{id}/sale, which nginx routes
	// to one replica per product, instead of POST /sale.
	byProduct bool
}

func newClient(base, adminToken string, concurrency int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2 * concurrency
	tr.MaxIdleConnsPerHost = 2 * concurrency // keep-alive for every buyer
	tr.DisableCompression = true
	return &client{
		base:       strings.TrimRight(base, "/"),
		adminToken: adminToken,
		// Longer than the service's lock wait and nginx's read timeout, so
		// those answer first.
		http: &http.Client{Transport: tr, Timeout: 60 * time.Second},
	}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// strategyInfo is one entry of GET /strategies.
type strategyInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
	// Available is false when the fleet lacks the strategy's lock service
	// (Needs names its setting); nil from a fleet older than the field.
	Available *bool  `json:"available,omitempty"`
	Needs     string `json:"needs,omitempty"`
}

// available is whether the fleet can sell with the strategy.
func (s strategyInfo) available() bool { return s.Available == nil || *s.Available }

// product is GET /products/{id}.
type product struct {
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
	Initial   int64  `json:"initial"`
	Sold      int64  `json:"sold"`  // units in the ledger, current round
	Sales     int64  `json:"sales"` // ledger rows, current round
	Round     int64  `json:"round"`
}

func (c *client) strategies(ctx context.Context) ([]strategyInfo, error) {
	var out []strategyInfo
	if err := c.getJSON(ctx, "/strategies", &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GET %s/strategies: empty list", c.base)
	}
	return out, nil
}

func (c *client) product(ctx context.Context, id string) (product, error) {
	var p product
	err := c.getJSON(ctx, "/products/"+url.PathEscape(id), &p)
	return p, err
}

// round is GET /products/{id}/rounds/{round}: one round of the ledger, current or past.
type round struct {
	ProductID string `json:"product_id"`
	Round     int64  `json:"round"`
	Initial   int64  `json:"initial"`
	Sold      int64  `json:"sold"`  // units in the ledger for this round
	Sales     int64  `json:"sales"` // ledger rows for this round
	Current   bool   `json:"current"`
}

func (c *client) round(ctx context.Context, id string, n int64) (round, error) {
	var r round
	err := c.getJSON(ctx, fmt.Sprintf("/products/%s/rounds/%d", url.PathEscape(id), n), &r)
	return r, err
}

// restock sets the product's stock, starting a new round of the ledger, and
// returns the product as restocked.
func (c *client) restock(ctx context.Context, id string, quantity int64) (product, error) {
	var p product
	err := c.admin(ctx, http.MethodPut, "/products/"+url.PathEscape(id), map[string]any{"quantity": quantity, "name": "load test " + id}, &p)
	if err != nil {
		return p, fmt.Errorf("restock %s: %w", id, err)
	}
	return p, nil
}

// defaultStrategy is GET /strategy: the fleet default that a sale naming no strategy uses.
func (c *client) defaultStrategy(ctx context.Context) (string, error) {
	var out struct{ Strategy string }
	if err := c.getJSON(ctx, "/strategy", &out); err != nil {
		return "", err
	}
	return out.Strategy, nil
}

// setDefaultStrategy is PUT /strategy: it switches the fleet default.
func (c *client) setDefaultStrategy(ctx context.Context, name string) error {
	if err := c.admin(ctx, http.MethodPut, "/strategy", map[string]string{"strategy": name}, nil); err != nil {
		return fmt.Errorf("switch the fleet default to %s: %w", name, err)
	}
	return nil
}

// awaitDefault polls GET /strategy until it answers name times in a row,
// so that every replica behind the load balancer has dropped its cached
// copy of the old default, and gives up after wait.
func (c *client) awaitDefault(ctx context.Context, name string, times int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	inARow, last := 0, ""
	for inARow < times {
		got, err := c.defaultStrategy(ctx)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("the fleet default is still %q %s after switching it to %s", last, wait, name)
		case err != nil:
			return err
		case got == name:
			inARow++
			continue
		}
		inARow, last = 0, got
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return nil
}

// admin sends an admin call with a JSON body and decodes a 2xx answer into
// into, when not nil.
func (c *client) admin(ctx context.Context, method, path string, in, into any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (pass the fleet's INVENTORY_ADMIN_TOKEN with --admin-token)"
		}
		return fmt.Errorf("%s %s = %s%s: %s", method, path, resp.Status, hint, bytes.TrimSpace(trim(b, 512)))
	}
	if into == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s %s: decode %q: %w", method, path, trim(b, 512), err)
	}
	return nil
}

func trim(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// problemOutcomeUnknown is the problem type of a 503 after which the
// service could not tell whether the sale committed.
const problemOutcomeUnknown = "urn:inventory:problem:outcome-unknown"

// outcome is what one buyer saw.
type outcome struct {
	status   int    // HTTP status, 0 when no answer came back
	instance string // X-Instance of the replica that answered
	err      error  // transport error, or the problem body of an unexpected status

	// From a 2xx: the sale's id, the round whose stock it decremented (0
	// when the answer did not say) and the strategy that sold.
	saleID   int64
	round    int64
	strategy string
	// retryAfter is a 503's Retry-After (seconds only, at most
	// maxRetryAfter): how long the service asked a retry to wait.
	retryAfter time.Duration
	// From a 409 or 503 problem: the lock broke and the database refused
	// the write (lock_breach), or the service could not tell whether the
	// sale committed (type outcome-unknown).
	breach, unknown bool
}

// definite reports whether the answer says for certain whether the buyer
// bought: sold (2xx) or sold out (409).
func (o outcome) definite() bool { return o.status/100 == 2 || o.status == http.StatusConflict }

// buy sends one sale of one unit of product: POST /sale, or POST
// /products/{id}/sale when c.byProduct. A named strategy is an admin call
// and carries the admin token; an empty one sells with the fleet default,
// as a buyer does. A non-empty key is sent as the Idempotency-Key.
func (c *client) buy(ctx context.Context, product, strategy, key string) outcome {
	// A struct, not a map: the sold-out phase sends thousands a second from
	// the same two cores as the fleet, so the buyer's own cost counts.
	target, body := c.base+"/sale", any(oneUnit{ProductID: product, Quantity: 1})
	if c.byProduct {
		target, body = c.base+"/products/"+url.PathEscape(product)+"/sale", oneUnit{Quantity: 1}
	}
	encoded, err := json.Marshal(body)
	if err != nil {
		return outcome{err: err}
	}
	if strategy != "" {
		target += "?strategy=" + url.QueryEscape(strategy)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(encoded))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if strategy != "" {
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, instance: resp.Header.Get("X-Instance")}
	if resp.StatusCode == http.StatusServiceUnavailable {
		o.retryAfter = retryAfter(resp.Header.Get("Retry-After"))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_, _ = io.Copy(io.Discard, resp.Body) // drain so the connection is reused
	switch {
	case err != nil:
		o.err = fmt.Errorf("POST /sale = %s: read the answer: %w", resp.Status, err)
	case resp.StatusCode/100 == 2:
		var sale struct {
			SaleID   int64  `json:"sale_id"`
			Round    int64  `json:"round"`
			Strategy string `json:"strategy"`
		}
		// An answer that does not parse still sold: the ledger has the last word.
		_ = json.Unmarshal(b, &sale)
		o.saleID, o.round, o.strategy = sale.SaleID, sale.Round, sale.Strategy
	case resp.StatusCode == http.StatusConflict && !bytes.Contains(b, []byte(`"lock_breach"`)):
		// A plain 409 (sold out, or too few left): nothing more to read.
		// The field is only present when true.
	case resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusServiceUnavailable:
		var p struct {
			Type       string `json:"type"`
			LockBreach bool   `json:"lock_breach"`
		}
		_ = json.Unmarshal(b, &p)
		o.breach = p.LockBreach
		o.unknown = resp.StatusCode == http.StatusServiceUnavailable && p.Type == problemOutcomeUnknown
	default:
		o.err = fmt.Errorf("POST /sale = %s: %s", resp.Status, bytes.TrimSpace(trim(b, 300)))
	}
	return o
}

// maxRetryAfter caps how long a buyer honours a Retry-After.
const maxRetryAfter = 5 * time.Second

// retryAfter reads a Retry-After of delay-seconds (the service's form);
// 0 for none, a date or anything else.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}

// oneUnit is a buyer's POST /sale body (product_id omitted for the
// product's own path).
type oneUnit struct {
	ProductID string `json:"product_id,omitempty"`
	Quantity  int    `json:"quantity"`
}

func (c *client) getJSON(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("GET %s: decode %q: %w", path, b, err)
	}
	return nil
}
