package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"inventory/internal/wire"
)

// maxSaleAnswer bounds a sale's answer; the service's are a few hundred
// bytes.
const maxSaleAnswer = 64 << 10

// Sell is POST /sale: it sells order.Quantity units of order.ProductID.
// An answer other than 2xx is a *Problem: 409 sold-out, 503 with
// RetryAfter, and so on.
func (c *Client) Sell(ctx context.Context, order SaleRequest, opts SaleOptions) (Sale, error) {
	// Not by encoding/json: this is the load tester's hot path.
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.sell(ctx, c.saleURL, body, opts)
}

// SellProduct is POST /products/{id}/sale: the same sale with the product
// in the path, which nginx routes to one replica per product.
func (c *Client) SellProduct(ctx context.Context, id string, order ProductSaleRequest, opts SaleOptions) (Sale, error) {
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.sell(ctx, c.base+"/products/"+url.PathEscape(id)+"/sale", body, opts)
}

// sell posts body to target and reads the answer.
func (c *Client) sell(ctx context.Context, target string, body *requestBody, opts SaleOptions) (Sale, error) {
	admin := opts.Strategy != ""
	if admin {
		target += "?strategy=" + url.QueryEscape(opts.Strategy)
	}
	path := target[len(c.base):]
	resp, err := c.send(ctx, http.MethodPost, target, admin, body, opts.IdempotencyKey)
	if err != nil {
		return Sale{}, err
	}
	buf := buffers.Get().(*[]byte)
	defer putBuffer(buf)
	b, err := readBody(resp, buf, maxSaleAnswer)
	// One string for the whole answer: every string in it is a substring.
	s := string(b)
	if resp.StatusCode/100 != 2 {
		return Sale{}, newProblem(http.MethodPost, path, resp, s)
	}
	if err != nil {
		return Sale{}, fmt.Errorf("POST %s = %s: read the answer: %w", path, resp.Status, err)
	}
	var sale Sale
	if !wire.ScanSale(s, &sale) {
		var decoded Sale // on the heap, but only here
		if jerr := json.Unmarshal(b, &decoded); jerr != nil {
			decoded = Sale{}
			err = fmt.Errorf("POST %s = %s: %w: %v: %.300q", path, resp.Status, ErrMalformedAnswer, jerr, s)
		}
		sale = decoded
	}
	sale.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if sale.Instance == "" {
		sale.Instance = resp.Header.Get("X-Instance")
	}
	return sale, err
}
