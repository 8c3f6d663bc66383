package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"inventory/internal/inventory"
	"inventory/internal/tracing"
	"inventory/internal/wire"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// maxRestock bounds a restock so that sums over the ledger stay far from overflow.
const maxRestock = 1_000_000_000_000

// handleSale is POST /sale, the product in the body.
func (s *server) handleSale(w http.ResponseWriter, r *http.Request) {
	s.serveSale(w, r, s.readSale)
}

// handleProductSale is POST /products/{id}/sale: the same sale with the
// product in the path, so a load balancer can route by product.
func (s *server) handleProductSale(w http.ResponseWriter, r *http.Request) {
	s.serveSale(w, r, s.readProductSale)
}

// serveSale reads a sale with read, sells it and answers.
func (s *server) serveSale(w http.ResponseWriter, r *http.Request, read func(http.ResponseWriter, *http.Request) (inventory.Order, string, error)) {
	start := time.Now()
	order, strategy, err := read(w, r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if strategy == "" {
		// The fleet default, pinned until this sale is answered: a switch
		// returns only once no sale of the old default runs anywhere.
		name, done, err := s.Default.Use(r.Context())
		if err != nil {
			// With its backends down, Default serves the last value it saw
			// while its lease lasts (and logs that once, not per sale).
			s.writeProblem(w, r, fmt.Errorf("%w: no default strategy: %v", inventory.ErrUnavailable, err))
			return
		}
		defer done()
		strategy = name
	}
	seller, err := s.seller(strategy)
	if err != nil {
		s.writeProblem(w, r, err, "strategy", strategy)
		return
	}
	ctx, span := tracing.Span(r.Context(), "sale")
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("inventory.strategy", strategy), attribute.String("inventory.product_id", order.ProductID),
			attribute.Int64("inventory.quantity", order.Quantity))
	}
	if c, open := s.Circuits.Refuses(ctx, order.ProductID); open {
		err := c.Err()
		s.saleAnswered(strategy, classify(err).slug, time.Since(start))
		s.writeProblem(w, r, err, "strategy", strategy, "product_id", order.ProductID)
		return
	}
	sale, err := seller.Sell(ctx, order)
	k := classify(err)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("inventory.outcome", k.slug))
		if err != nil {
			span.SetStatus(codes.Error, k.slug)
		} else {
			span.SetAttributes(attribute.Int64("inventory.sale_id", sale.ID), attribute.Int64("inventory.remaining", sale.Remaining),
				attribute.Int("inventory.round", sale.Round), attribute.Int64("inventory.fence", sale.Fence), attribute.Bool("inventory.replayed", sale.Replayed))
			if sale.OrderID != "" {
				span.SetAttributes(attribute.String("inventory.order_id", sale.OrderID))
			}
		}
	}
	result := k.slug
	if err == nil && sale.Replayed {
		result = "replayed"
	}
	s.saleAnswered(strategy, result, time.Since(start))
	if err != nil {
		if errors.Is(err, inventory.ErrLockBreach) {
			s.Metrics.LockBreach(strategy)
		}
		s.writeClassified(w, r, k, err, "strategy", strategy, "product_id", order.ProductID)
		return
	}
	if sale.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if sale.OrderID != "" {
		// A hold, or its replay: the replay answers as the first answer
		// did, with the order's state now.
		w.Header().Set("Location", "/orders/"+sale.OrderID)
		writeJSON(w, http.StatusCreated, wire.HeldSale{
			OrderID:   sale.OrderID,
			SaleID:    sale.ID,
			ProductID: sale.ProductID,
			Quantity:  sale.Quantity,
			State:     string(sale.OrderState),
			ExpiresAt: sale.ExpiresAt.UTC(),
			Remaining: sale.Remaining,
			Round:     int64(sale.Round),
			Strategy:  sale.Strategy,
			Instance:  sale.Instance,
		})
		return
	}
	writeJSON(w, http.StatusOK, wire.Sale{
		SaleID:    sale.ID,
		ProductID: sale.ProductID,
		Quantity:  sale.Quantity,
		Remaining: sale.Remaining,
		Round:     int64(sale.Round),
		Strategy:  sale.Strategy,
		Instance:  sale.Instance,
	})
}

// readSale validates everything about a sale request before any backend is touched.
func (s *server) readSale(w http.ResponseWriter, r *http.Request) (inventory.Order, string, error) {
	strategy, err := s.strategyFor(r)
	if err != nil {
		return inventory.Order{}, "", err
	}
	req, err := readSaleBody(w, r, true)
	if err != nil {
		return inventory.Order{}, "", err
	}
	if req.ProductID == nil {
		return inventory.Order{}, "", fmt.Errorf("%w: product_id is required", errMalformed)
	}
	order, err := s.order(r, *req.ProductID, req.Quantity, req.PayWithin)
	return order, strategy, err
}

// readProductSale is readSale for POST /products/{id}/sale.
func (s *server) readProductSale(w http.ResponseWriter, r *http.Request) (inventory.Order, string, error) {
	strategy, err := s.strategyFor(r)
	if err != nil {
		return inventory.Order{}, "", err
	}
	req, err := readSaleBody(w, r, false)
	if err != nil {
		return inventory.Order{}, "", err
	}
	order, err := s.order(r, chi.URLParam(r, "id"), req.Quantity, req.PayWithin)
	return order, strategy, err
}

// readSaleBody reads a sale's body: POST /sale's (withProduct) or POST
// /products/{id}/sale's. The usual shape is scanned; anything else is
// decoded by encoding/json, which answers it or says what is wrong.
func readSaleBody(w http.ResponseWriter, r *http.Request, withProduct bool) (wire.SaleBody, error) {
	body, err := readJSONBody(w, r)
	if err != nil {
		return wire.SaleBody{}, err
	}
	if req, scanned := wire.ScanSaleRequest(string(body), withProduct); scanned {
		return req, nil
	}
	if withProduct {
		var req wire.SaleBody
		err := unmarshalStrict(body, &req)
		return req, payWithinType(body, err)
	}
	var req wire.ProductSaleBody
	err = unmarshalStrict(body, &req)
	return wire.SaleBody{Quantity: req.Quantity, PayWithin: req.PayWithin}, payWithinType(body, err)
}

// payWithinType makes a body's decode error a bad pay_within when that
// member is there but not a string (a number of seconds, say): the body
// asked for a hold, and only its deadline is wrong.
func payWithinType(body []byte, err error) error {
	if err == nil {
		return nil
	}
	var m struct {
		PayWithin json.RawMessage `json:"pay_within"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.PayWithin) == 0 || m.PayWithin[0] == '"' || string(m.PayWithin) == "null" {
		return err
	}
	return fmt.Errorf("%w: pay_within must be a string, a duration from %v to %v such as \"15m\", got %.40s",
		inventory.ErrBadPayWithin, inventory.MinPayWithin, inventory.MaxPayWithin, m.PayWithin)
}

// payWithin reads a sale's pay_within: 0 (a final sale) when the body has
// none or null; else a duration from MinPayWithin to MaxPayWithin, in Go's
// notation without a sign ("15m", "90s", "1h30m"), or ErrBadPayWithin.
func payWithin(v *string) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*v)
	// No sign: the description's pattern has none, and "+15m" is no
	// clearer than "15m".
	if err != nil || strings.HasPrefix(*v, "+") || strings.HasPrefix(*v, "-") || d < inventory.MinPayWithin || d > inventory.MaxPayWithin {
		return 0, fmt.Errorf("%w: pay_within must be a duration from %v to %v such as \"15m\" or \"90s\", got %.40q",
			inventory.ErrBadPayWithin, inventory.MinPayWithin, inventory.MaxPayWithin, *v)
	}
	return d, nil
}

// order checks a sale's product id, quantity, payment deadline (a hold's)
// and Idempotency-Key.
func (s *server) order(r *http.Request, id string, quantity *int64, payWithinText *string) (inventory.Order, error) {
	if quantity == nil {
		return inventory.Order{}, fmt.Errorf("%w: quantity is required", errMalformed)
	}
	if err := inventory.ValidateProductID(id); err != nil {
		return inventory.Order{}, err
	}
	if q := *quantity; q < 1 || q > s.MaxQuantity {
		return inventory.Order{}, fmt.Errorf("%w: quantity must be between 1 and %d, got %d", inventory.ErrBadQuantity, s.MaxQuantity, q)
	}
	hold, err := payWithin(payWithinText)
	if err != nil {
		return inventory.Order{}, err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return inventory.Order{}, err
	}
	return inventory.Order{ProductID: id, Quantity: *quantity, IdempotencyKey: key, PayWithin: hold}, nil
}

// seller is the strategy's seller, or an error wrapping
// inventory.ErrNotConfigured, naming the missing setting, when this replica was
// started without the lock service the strategy needs.
func (s *server) seller(strategy string) (inventory.Seller, error) {
	if seller := s.Sellers[strategy]; seller != nil {
		return seller, nil
	}
	info, err := inventory.Lookup(strategy)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: strategy %q needs %s, which this replica was started without", inventory.ErrNotConfigured, strategy, info.Needs)
}

// strategyFor is the ?strategy= of the request, or "" for the fleet
// default (serveSale takes it, pinned, once the request is read). Naming the
// strategy is an admin capability (a demo and test tool, not a buyer's
// choice), checked before anything else about the sale.
func (s *server) strategyFor(r *http.Request) (string, error) {
	name, given, err := strategyParam(r.URL.RawQuery)
	if err != nil { // else a mangled ?strategy= would quietly sell with the default
		return "", fmt.Errorf("%w: query string: %v", errMalformed, err)
	}
	if given > 0 {
		if err := s.checkAdmin(r); err != nil {
			return "", err
		}
		if given != 1 {
			return "", fmt.Errorf("%w: give ?strategy= once, got %d values", errMalformed, given)
		}
		if _, err := inventory.Lookup(name); err != nil {
			return "", err
		}
		return name, nil
	}
	return "", nil
}

// strategyParam is what url.ParseQuery makes of rawQuery's strategy
// values: how many are given, and the first. The two usual queries, none
// and a lone plain ?strategy=name, are read without building the map: the
// load tester's sold-out crowd sends the second thousands of times a second.
func strategyParam(rawQuery string) (first string, given int, err error) {
	if rawQuery == "" {
		return "", 0, nil
	}
	if name, ok := strings.CutPrefix(rawQuery, "strategy="); ok && !strings.ContainsAny(name, "&;%+") {
		return name, 1, nil
	}
	query, err := url.ParseQuery(rawQuery)
	values := query["strategy"]
	if len(values) > 0 {
		first = values[0]
	}
	return first, len(values), err
}

// idempotencyKey is the optional Idempotency-Key header: 1–255 visible ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values("Idempotency-Key")
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", fmt.Errorf("%w: Idempotency-Key given %d times", errMalformed, len(values))
	}
	key := values[0]
	if len(key) == 0 || len(key) > maxIdempotencyKey {
		return "", fmt.Errorf("%w: Idempotency-Key must be 1-%d characters, got %d", errMalformed, maxIdempotencyKey, len(key))
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: Idempotency-Key must be visible ASCII characters", errMalformed)
		}
	}
	return key, nil
}

// toProduct is p as GET and PUT /products/{id} answer it.
func toProduct(p inventory.Product) wire.Product {
	return wire.Product{ProductID: p.ID, Name: p.Name, Quantity: p.Quantity, Initial: p.Initial, Sold: p.Sold, Sales: p.Sales,
		Round: int64(p.Round), Version: p.Version}
}

func (s *server) handleGetProduct(w http.ResponseWriter, r *http.Request) {
	id, ok := s.productID(w, r)
	if !ok {
		return
	}
	p, age, err := s.readProduct(r, id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", roundETag(p.Round))
	w.Header().Set("Age", ageValue(age))
	writeJSON(w, http.StatusOK, toProduct(p))
}

// handleGetRound answers one round of a product from the ledger, current or past.
func (s *server) handleGetRound(w http.ResponseWriter, r *http.Request) {
	id, ok := s.productID(w, r)
	if !ok {
		return
	}
	// Rounds are Postgres ints: 1 to 2^31-1.
	n, err := strconv.ParseInt(chi.URLParam(r, "round"), 10, 32)
	if err != nil || n < 1 {
		s.writeProblem(w, r, fmt.Errorf("%w: round must be a whole number from 1 to %d, got %q", errMalformed, math.MaxInt32, chi.URLParam(r, "round")))
		return
	}
	rd, err := s.Store.Round(r.Context(), id, int(n))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Round{ProductID: rd.ProductID, Round: int64(rd.Round), Initial: rd.Initial, Sold: rd.Sold,
		Sales: rd.Sales, Current: rd.Current})
}

// handlePutProduct creates a product (201) or restocks it (200), starting a
// new round. It is safe to retry: with an Idempotency-Key a repeat answers
// the first call's result and starts no round; with If-Match (the round a
// GET's ETag showed), a product in another round answers 412 and nothing
// changes.
func (s *server) handlePutProduct(w http.ResponseWriter, r *http.Request) {
	id, ok := s.productID(w, r)
	if !ok {
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ifRound, err := ifMatchRound(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req wire.RestockBody
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	switch {
	case req.Quantity == nil:
		s.writeProblem(w, r, fmt.Errorf("%w: quantity is required", errMalformed))
		return
	case *req.Quantity < 0 || *req.Quantity > maxRestock:
		s.writeProblem(w, r, fmt.Errorf("%w: quantity must be between 0 and %d, got %d", inventory.ErrBadQuantity, int64(maxRestock), *req.Quantity))
		return
	case len(req.Name) > 200:
		s.writeProblem(w, r, fmt.Errorf("%w: name must be at most 200 bytes", errMalformed))
		return
	case !utf8.ValidString(req.Name) || strings.ContainsFunc(req.Name, unicode.IsControl):
		// Postgres refuses NUL in text (a 500), and control characters
		// would land in logs and pages as they are.
		s.writeProblem(w, r, fmt.Errorf("%w: name must be UTF-8 text without control characters", errMalformed))
		return
	}
	// Detached from the request: an admin who hangs up must not leave the
	// restock half done or its outcome unknown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), restockTimeout)
	defer cancel()
	done, err := s.restocker.Restock(ctx, inventory.RestockOrder{ProductID: id, Name: req.Name, Quantity: *req.Quantity,
		IfRound: ifRound, IdempotencyKey: key})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	// After the commit, replayed or not (the first call's drop may have failed).
	s.dropProduct(ctx, r, id, done.Round)
	if !done.Replayed {
		// The new round is one no circuit covers; the other replicas find
		// that out before they refuse a sale (Circuits.Refuses).
		s.Circuits.Forget(id)
	}
	if done.ResetErr != nil {
		s.log.WarnContext(r.Context(), "restocked, but the product's Redis keys could not be deleted (nothing depends on it)",
			"product_id", id, "round", done.Round, "err", done.ResetErr, "request_id", requestID(r))
	}
	s.log.InfoContext(r.Context(), "restocked", "product_id", id, "quantity", done.Quantity, "round", done.Round,
		"replayed", done.Replayed, "request_id", requestID(r))
	status := http.StatusOK
	if done.Round == 1 { // a product's first round is its creation
		status = http.StatusCreated
		w.Header().Set("Location", "/products/"+id)
	}
	if done.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("ETag", roundETag(done.Round))
	writeJSON(w, status, toProduct(done.Product))
}

// restockTimeout bounds a restock, which waits for the product's row (its
// sales in flight) and for the replicas' sold-out marks of older rounds.
const restockTimeout = time.Minute

// roundETag is the entity tag of a product in round n: a restock's If-Match
// names it.
func roundETag(n int) string { return `"` + strconv.Itoa(n) + `"` }

// ifMatchRound reads If-Match as the round a restock expects: 0 when the
// header is absent. It must be one strong entity tag of a round ("3"); a
// weak tag or "*" never names a round, and a list of them is refused, so
// that a retry's precondition is exactly one round.
func ifMatchRound(r *http.Request) (int, error) {
	values := r.Header.Values("If-Match")
	switch {
	case len(values) == 0:
		return 0, nil
	case len(values) > 1:
		return 0, fmt.Errorf("%w: If-Match given %d times", errMalformed, len(values))
	}
	tag := strings.TrimSpace(values[0])
	inner, ok := strings.CutPrefix(tag, `"`)
	if ok {
		inner, ok = strings.CutSuffix(inner, `"`)
	}
	n, err := strconv.ParseInt(inner, 10, 32)
	if !ok || err != nil || n < 1 || strconv.FormatInt(n, 10) != inner {
		return 0, fmt.Errorf("%w: If-Match must be one round as a strong entity tag, e.g. \"3\" (the ETag of GET /products/{id}), got %.40q", errMalformed, tag)
	}
	return int(n), nil
}

func (s *server) handleListStrategies(w http.ResponseWriter, _ *http.Request) {
	list := make([]wire.StrategyInfo, len(inventory.Strategies))
	for i, st := range inventory.Strategies {
		desc := st.Description
		if note := s.Notes[st.Name]; note != "" {
			desc += ". " + note
		}
		list[i] = wire.StrategyInfo{Name: st.Name, Description: desc, Safe: st.Safe, Available: s.Sellers[st.Name] != nil, Needs: st.Needs,
			LockBackend: st.LockBackend(), UsesRedis: st.Redis, Batches: st.Batches}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) handleGetStrategy(w http.ResponseWriter, r *http.Request) {
	name, err := s.Default.Get(r.Context())
	if err != nil {
		s.writeProblem(w, r, fmt.Errorf("%w: %v", inventory.ErrUnavailable, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.StrategyChoice{Strategy: name})
}

func (s *server) handlePutStrategy(w http.ResponseWriter, r *http.Request) {
	var req wire.StrategyChoiceBody
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.Strategy == nil {
		s.writeProblem(w, r, fmt.Errorf("%w: strategy is required", errMalformed))
		return
	}
	// A fleet default this replica cannot sell with is refused here; the
	// other replicas are expected to run with the same settings.
	if _, err := s.seller(*req.Strategy); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.Default.Set(r.Context(), *req.Strategy); err != nil {
		if !errors.Is(err, inventory.ErrUnknownStrategy) {
			err = fmt.Errorf("%w: %v", inventory.ErrUnavailable, err)
		}
		s.writeProblem(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "default strategy switched", "strategy", *req.Strategy, "request_id", requestID(r))
	writeJSON(w, http.StatusOK, wire.StrategyChoice{Strategy: *req.Strategy})
}

func (s *server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.Health{Status: "ok", Instance: s.Instance})
}

func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready(r.Context()); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Health{Status: "ready", Instance: s.Instance})
}

// productID is the product id of r's path, or false after answering 400
// for a bad one.
func (s *server) productID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if err := inventory.ValidateProductID(id); err != nil {
		s.writeProblem(w, r, err)
		return "", false
	}
	return id, true
}
