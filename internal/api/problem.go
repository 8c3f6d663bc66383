package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"inventory/internal/stock"
)

// Errors of the HTTP layer itself; stock's sentinels cover the rest.
var (
	errMalformed        = errors.New("malformed request")
	errUnsupportedMedia = errors.New("unsupported media type")
	errTooLarge         = errors.New("request body too large")
	errUnauthorized     = errors.New("missing or wrong admin token")
	errAdminDisabled    = errors.New("admin calls are disabled: INVENTORY_ADMIN_TOKEN is not set")
	errRouteNotFound    = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed")
)

// kind is one row of the error table: the HTTP status and the problem's stable type.
type kind struct {
	status int
	slug   string
	title  string
}

// problemTypePrefix makes each slug a stable problem type URI (RFC 9457 §3.1.1).
const problemTypePrefix = "urn:inventory:problem:"

// classify is the one place where an error becomes an HTTP status. The slug
// doubles as the result label of the sale metrics.
func classify(err error) kind {
	switch {
	case err == nil:
		return kind{http.StatusOK, "ok", "OK"}
	case errors.Is(err, errMalformed):
		return kind{http.StatusBadRequest, "malformed-request", "Malformed request"}
	case errors.Is(err, stock.ErrBadProductID):
		return kind{http.StatusBadRequest, "bad-product-id", "Bad product id"}
	case errors.Is(err, stock.ErrBadQuantity):
		return kind{http.StatusBadRequest, "bad-quantity", "Bad quantity"}
	case errors.Is(err, stock.ErrUnknownStrategy):
		return kind{http.StatusBadRequest, "unknown-strategy", "Unknown strategy"}
	case errors.Is(err, errUnauthorized):
		return kind{http.StatusUnauthorized, "unauthorized", "Unauthorized"}
	case errors.Is(err, errAdminDisabled):
		return kind{http.StatusForbidden, "admin-disabled", "Admin calls disabled"}
	case errors.Is(err, stock.ErrNotFound):
		return kind{http.StatusNotFound, "product-not-found", "Product not found"}
	case errors.Is(err, errRouteNotFound):
		return kind{http.StatusNotFound, "not-found", "Not found"}
	case errors.Is(err, errMethodNotAllowed):
		return kind{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed"}
	case errors.Is(err, stock.ErrSoldOut):
		return kind{http.StatusConflict, "sold-out", "Sold out"}
	case errors.Is(err, errTooLarge):
		return kind{http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large"}
	case errors.Is(err, errUnsupportedMedia):
		return kind{http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type"}
	case errors.Is(err, stock.ErrIdempotencyConflict):
		return kind{http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused"}
	case errors.Is(err, stock.ErrLockTimeout):
		return kind{http.StatusServiceUnavailable, "lock-timeout", "Timed out waiting for the lock"}
	case errors.Is(err, stock.ErrContention):
		return kind{http.StatusServiceUnavailable, "contention", "Too much contention"}
	case errors.Is(err, stock.ErrLockLost):
		return kind{http.StatusServiceUnavailable, "lock-lost", "Lock lost, sale rolled back"}
	case errors.Is(err, stock.ErrUnavailable):
		return kind{http.StatusServiceUnavailable, "unavailable", "Backend unavailable"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kind{http.StatusServiceUnavailable, "canceled", "Request canceled or timed out"}
	default:
		return kind{http.StatusInternalServerError, "internal", "Internal error"}
	}
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// writeProblem answers with err as problem+json. Server-side errors are
// logged once here; their detail is not shown to the client.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	k := classify(err)
	p := problem{
		Type:      problemTypePrefix + k.slug,
		Title:     k.title,
		Status:    k.status,
		Detail:    err.Error(),
		Instance:  r.URL.Path,
		RequestID: requestID(r),
	}
	switch {
	case k.status >= 500:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", p.RequestID, "problem", k.slug, "err", err)
		if k.status == http.StatusInternalServerError {
			p.Detail = "internal error; see the server log for request " + p.RequestID
		}
		if k.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
	case k.status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="inventory"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(k.status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
