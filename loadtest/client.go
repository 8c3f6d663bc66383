package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client speaks the inventory HTTP API, as any outside caller would.
type client struct {
	base       string
	adminToken string
	http       *http.Client
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
}

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

// restock sets the product's stock, starting a new round of the ledger.
func (c *client) restock(ctx context.Context, id string, quantity int64) error {
	body, _ := json.Marshal(map[string]any{"quantity": quantity, "name": "load test " + id})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+"/products/"+url.PathEscape(id), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("restock %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (pass the fleet's INVENTORY_ADMIN_TOKEN with --admin-token)"
		}
		return fmt.Errorf("restock %s: PUT /products/%s = %s%s: %s", id, id, resp.Status, hint, bytes.TrimSpace(b))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// outcome is what one buyer saw.
type outcome struct {
	status   int    // HTTP status, 0 when no answer came back
	instance string // X-Instance of the replica that answered
	err      error  // transport error, or the problem body of an unexpected status
}

// buy sends one POST /sale for one unit with the given strategy.
func (c *client) buy(ctx context.Context, body []byte, strategy string) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/sale?strategy="+url.QueryEscape(strategy), bytes.NewReader(body))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, instance: resp.Header.Get("X-Instance")}
	switch {
	case resp.StatusCode/100 == 2, resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusServiceUnavailable:
		_, _ = io.Copy(io.Discard, resp.Body) // drain so the connection is reused
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		_, _ = io.Copy(io.Discard, resp.Body)
		o.err = fmt.Errorf("POST /sale = %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return o
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
