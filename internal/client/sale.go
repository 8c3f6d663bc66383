package client

import (
	"context"
	"encoding/json"
	"errors"
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
// RetryAfter, and so on. A hold (order.PayWithin) is Hold's: Sell
// refuses it without sending it, since its answer is the order's.
func (c *Client) Sell(ctx context.Context, order SaleRequest, opts SaleOptions) (Sale, error) {
	if order.PayWithin != "" {
		return Sale{}, errHoldBySell
	}
	// Not by encoding/json: this is the load tester's hot path.
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.sell(ctx, c.saleURL, body, opts)
}

// SellProduct is POST /products/{id}/sale: the same sale with the product
// in the path, which nginx routes to one replica per product.
func (c *Client) SellProduct(ctx context.Context, id string, order ProductSaleRequest, opts SaleOptions) (Sale, error) {
	if order.PayWithin != "" {
		return Sale{}, errHoldBySell
	}
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.sell(ctx, c.base+productPath(id)+"/sale", body, opts)
}

// errHoldBySell is Sell's error for a hold.
var errHoldBySell = errors.New("a sale with PayWithin is a hold: call Hold or HoldProduct, whose answer is the order")

// Hold is POST /sale with order.PayWithin (a duration such as "15m"): it
// holds order.Quantity units of order.ProductID for an order that must be
// paid within it (Pay), or expires and gives them back. The answer is 201
// with the order (HeldSale.Replayed for a hold replayed by its
// Idempotency-Key, with the order's state now); any other answer is a
// *Problem, as for Sell.
func (c *Client) Hold(ctx context.Context, order SaleRequest, opts SaleOptions) (HeldSale, error) {
	if order.PayWithin == "" {
		return HeldSale{}, errors.New("a hold needs PayWithin, the time the buyer has to pay (\"15m\")")
	}
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.hold(ctx, c.saleURL, body, opts)
}

// HoldProduct is Hold with the product in the path (POST
// /products/{id}/sale), as SellProduct is Sell.
func (c *Client) HoldProduct(ctx context.Context, id string, order ProductSaleRequest, opts SaleOptions) (HeldSale, error) {
	if order.PayWithin == "" {
		return HeldSale{}, errors.New("a hold needs PayWithin, the time the buyer has to pay (\"15m\")")
	}
	body := &requestBody{}
	body.b = order.AppendJSON(body.arr[:0])
	return c.hold(ctx, c.base+productPath(id)+"/sale", body, opts)
}

// hold posts body, a hold's, to target and reads the answer.
func (c *Client) hold(ctx context.Context, target string, body *requestBody, opts SaleOptions) (HeldSale, error) {
	buf := buffers.Get().(*[]byte)
	defer putBuffer(buf)
	path, resp, b, err := c.postSale(ctx, target, body, opts, buf)
	if err != nil {
		return HeldSale{}, err
	}
	var h HeldSale
	if jerr := json.Unmarshal(b, &h); jerr != nil || resp.StatusCode != http.StatusCreated || h.OrderID == "" {
		return HeldSale{}, fmt.Errorf("POST %s = %s: %w: want 201 with an order, got %v: %.300q", path, resp.Status, ErrMalformedAnswer, jerr, b)
	}
	h.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if h.Instance == "" {
		h.Instance = resp.Header.Get("X-Instance")
	}
	return h, nil
}

// postSale posts body, a sale's or a hold's, to target, a URL of c's
// (with opts' strategy and key), and reads the answer into buf: the body
// of a 2xx, else a *Problem. It returns the path as sent, the query
// included.
func (c *Client) postSale(ctx context.Context, target string, body *requestBody, opts SaleOptions, buf *[]byte) (string, *http.Response, []byte, error) {
	admin := opts.Strategy != ""
	if admin {
		target += "?strategy=" + url.QueryEscape(opts.Strategy)
	}
	path := target[len(c.base):]
	resp, err := c.send(ctx, http.MethodPost, target, admin, body, opts.IdempotencyKey)
	if err != nil {
		return path, nil, nil, err
	}
	b, err := readBody(resp, buf, maxSaleAnswer)
	if resp.StatusCode/100 != 2 {
		return path, resp, nil, newProblem(http.MethodPost, path, resp, string(b))
	}
	if err != nil {
		return path, resp, nil, fmt.Errorf("POST %s = %s: read the answer: %w", path, resp.Status, err)
	}
	return path, resp, b, nil
}

// sell posts body to target and reads the answer.
func (c *Client) sell(ctx context.Context, target string, body *requestBody, opts SaleOptions) (Sale, error) {
	buf := buffers.Get().(*[]byte)
	defer putBuffer(buf)
	path, resp, b, err := c.postSale(ctx, target, body, opts, buf)
	if err != nil {
		return Sale{}, err
	}
	// One string for the whole answer: every string in it is a substring.
	s := string(b)
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
