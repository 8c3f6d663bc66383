package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"inventory/internal/inventory"
	"inventory/internal/watchdog"
	"inventory/internal/wire"
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

// kind is one row of the error table: the HTTP status, the problem's stable
// type, and how it is told and logged.
type kind struct {
	status int
	slug   string
	title  string
	// detail is the answer's detail, whatever the error says. Only the kinds
	// whose errors are our own validation messages about the request leave
	// it empty and show the error's text: any other error may carry a
	// driver's or Redis's words, which are for the log, not the client.
	detail string
	// level is how the problem is logged: Debug for the client's mistakes
	// and business answers, Warn for what load and contention are expected
	// to cause, Error for failures someone should look at.
	level slog.Level
	// retry is whether a 503 says Retry-After: not when a retry could buy
	// twice without the same Idempotency-Key.
	retry bool
}

// problemTypePrefix makes each slug a stable problem type URI.
const problemTypePrefix = wire.ProblemTypePrefix

// classify is the one place where an error becomes an HTTP status. The slug
// doubles as the result label of the sale metrics. Order matters: an error
// may wrap several sentinels.
func classify(err error) kind {
	const debug, warn, fail = slog.LevelDebug, slog.LevelWarn, slog.LevelError
	switch {
	case err == nil:
		return kind{http.StatusOK, "ok", "OK", "", debug, false}
	// First: whatever else the error says, the sale may have committed.
	case errors.Is(err, inventory.ErrOutcomeUnknown):
		return kind{http.StatusServiceUnavailable, "outcome-unknown", "Sale outcome unknown",
			"The sale may or may not have happened: the database did not confirm it in time. " +
				"Retry with the same Idempotency-Key to get the original sale if it happened, or a new one if it did not; " +
				"without one, a retry may buy twice.", fail, false}
	case errors.Is(err, errMalformed):
		return kind{http.StatusBadRequest, "malformed-request", "Malformed request", "", debug, false}
	// An order's answers before the lock's: a step the guard refused
	// changed nothing, whatever became of the lock meanwhile.
	case errors.Is(err, inventory.ErrOrderExpired):
		return kind{http.StatusConflict, "order-expired", "Order expired",
			"The order's payment deadline has passed; it can no longer be paid. Nothing changed.", debug, false}
	case errors.Is(err, inventory.ErrOrderState):
		return kind{http.StatusConflict, "order-state", "Order state does not allow this",
			"The order's state does not allow this step. Nothing changed.", debug, false}
	case errors.Is(err, inventory.ErrOrderNotFound):
		return kind{http.StatusNotFound, "order-not-found", "Order not found", "There is no such order.", debug, false}
	case errors.Is(err, inventory.ErrBadOrderID):
		return kind{http.StatusBadRequest, "bad-order-id", "Bad order id", "", debug, false}
	case errors.Is(err, inventory.ErrBadPayWithin):
		return kind{http.StatusBadRequest, "bad-pay-within", "Bad pay_within", "", debug, false}
	case errors.Is(err, inventory.ErrBadAction):
		// No route asks for another step (the expiry job's alone expires).
		return kind{http.StatusBadRequest, "malformed-request", "Malformed request", "", debug, false}
	case errors.Is(err, inventory.ErrBadProductID):
		return kind{http.StatusBadRequest, "bad-product-id", "Bad product id", "", debug, false}
	case errors.Is(err, inventory.ErrBadQuantity):
		return kind{http.StatusBadRequest, "bad-quantity", "Bad quantity", "", debug, false}
	case errors.Is(err, inventory.ErrUnknownStrategy):
		return kind{http.StatusBadRequest, "unknown-strategy", "Unknown strategy", "", debug, false}
	case errors.Is(err, errUnauthorized):
		return kind{http.StatusUnauthorized, "unauthorized", "Unauthorized",
			"This call needs the admin bearer token (Authorization: Bearer ...).", debug, false}
	case errors.Is(err, errAdminDisabled):
		return kind{http.StatusForbidden, "admin-disabled", "Admin calls disabled",
			"Admin calls are disabled on this service: INVENTORY_ADMIN_TOKEN is not set.", debug, false}
	case errors.Is(err, inventory.ErrNotFound):
		return kind{http.StatusNotFound, "product-not-found", "Product not found",
			"There is no such product, or no such round of it.", debug, false}
	case errors.Is(err, errRouteNotFound):
		return kind{http.StatusNotFound, "not-found", "Not found", "", debug, false}
	case errors.Is(err, errMethodNotAllowed):
		return kind{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", "", debug, false}
	case errors.Is(err, inventory.ErrSoldOut):
		return kind{http.StatusConflict, "sold-out", "Sold out",
			"Fewer units are left than this order asks for; nothing was sold.", debug, false}
	case errors.Is(err, errTooLarge):
		return kind{http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large", "", debug, false}
	case errors.Is(err, errUnsupportedMedia):
		return kind{http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", "", debug, false}
	case errors.Is(err, inventory.ErrIdempotencyConflict):
		return kind{http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused",
			"This Idempotency-Key was already used for a different request; nothing was sold or changed.", debug, false}
	case errors.Is(err, inventory.ErrRoundMoved):
		return kind{http.StatusPreconditionFailed, "round-moved", "Round moved",
			"The product is no longer in the round If-Match names (or does not exist); nothing was restocked. Read it again (GET /products/{id}, its ETag) before restocking.", debug, false}
	case errors.Is(err, errTooManyReads):
		return kind{http.StatusTooManyRequests, "too-many-requests", "Too many requests",
			"This replica answers a limited number of reads per second, and this one found no turn within a second; nothing was read. Try again shortly.", warn, true}
	case errors.Is(err, watchdog.ErrCircuitOpen):
		// The detail is the evidence, in our own words.
		return kind{http.StatusServiceUnavailable, "circuit-open", "Sales of this product are stopped", "", warn, true}
	case errors.Is(err, inventory.ErrLockTimeout):
		return kind{http.StatusServiceUnavailable, "lock-timeout", "Timed out waiting for the lock",
			"Too many buyers were ahead of this one to wait for; nothing was sold. Try again shortly.", warn, true}
	case errors.Is(err, inventory.ErrContention):
		return kind{http.StatusServiceUnavailable, "contention", "Too much contention",
			"Too many buyers changed this product at once to get this order in; nothing was sold. Try again shortly.", warn, true}
	case errors.Is(err, inventory.ErrOverloaded):
		return kind{http.StatusServiceUnavailable, "overloaded", "Too many buyers waiting",
			"As many buyers of this product as this service lets wait are already waiting; nothing was tried. Try again shortly.", warn, true}
	case errors.Is(err, inventory.ErrLockLost):
		return kind{http.StatusServiceUnavailable, "lock-lost", "Lock lost, sale rolled back",
			"The sale lost its lock before it could commit and was rolled back; nothing was sold. Try again shortly.", warn, true}
	case errors.Is(err, inventory.ErrNotConfigured):
		return kind{http.StatusServiceUnavailable, "strategy-unavailable", "Strategy unavailable", "", debug, false}
	case errors.Is(err, inventory.ErrUnavailable):
		return kind{http.StatusServiceUnavailable, "unavailable", "Backend unavailable",
			"A database this service needs did not answer in time. Try again shortly.", fail, true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kind{http.StatusServiceUnavailable, "canceled", "Request canceled or timed out",
			"The request was canceled or ran out of time before it finished.", warn, true}
	default:
		return kind{http.StatusInternalServerError, "internal", "Internal error",
			"Something went wrong on our side; the server log has the details under this request_id.", fail, false}
	}
}

// writeProblem answers with err as problem+json and logs it once, with
// attrs (slog key-value pairs) added to the log line. The detail shown is
// the kind's fixed sentence unless the error is one of our own validation
// messages; the error itself is only logged.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, err error, attrs ...any) {
	s.writeClassified(w, r, classify(err), err, attrs...)
}

// writeClassified is writeProblem for an error already classified as k.
func (s *server) writeClassified(w http.ResponseWriter, r *http.Request, k kind, err error, attrs ...any) {
	s.sendProblem(w, r, k, err, problemFor(r, k, err), attrs...)
}

// problemFor is the problem body of r's answer err, classified as k.
func problemFor(r *http.Request, k kind, err error) wire.Problem {
	p := wire.Problem{
		Type:       problemTypePrefix + k.slug,
		Title:      k.title,
		Status:     int64(k.status),
		Detail:     k.detail,
		Instance:   r.URL.Path,
		RequestID:  requestID(r),
		LockBreach: errors.Is(err, inventory.ErrLockBreach),
	}
	if p.Detail == "" {
		p.Detail = err.Error()
		// A row without its sentence must still not leak; the 5xx whose
		// messages are ours name the setting a strategy is missing, or the
		// evidence a product's circuit was opened on.
		if k.status >= 500 && !errors.Is(err, inventory.ErrNotConfigured) && !errors.Is(err, watchdog.ErrCircuitOpen) {
			p.Detail = k.title
		}
	}
	return p
}

// sendProblem answers r with p, the problem of err classified as k, and
// logs it once, with attrs added to the log line.
func (s *server) sendProblem(w http.ResponseWriter, r *http.Request, k kind, err error, p wire.Problem, attrs ...any) {
	msg, level := "request failed", k.level
	if p.LockBreach {
		msg, level = "lock breach caught by the database", max(level, slog.LevelWarn)
		attrs = append(attrs, "lock_breach", true)
	}
	// The crowd after a sell-out gets thousands of 409s a second, logged
	// at debug: build the line only when it is written.
	if s.log.Enabled(r.Context(), level) {
		attrs = append([]any{"method", r.Method, "path", r.URL.Path, "request_id", p.RequestID,
			"status", k.status, "problem", k.slug, "err", err}, attrs...)
		s.log.Log(r.Context(), level, msg, attrs...)
	}
	switch {
	case k.retry:
		w.Header().Set("Retry-After", "1")
	case k.status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="inventory"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(k.status)
	buf := problemBuffers.Get().(*[]byte)
	*buf = p.AppendJSON((*buf)[:0])
	_, _ = w.Write(*buf)
	problemBuffers.Put(buf)
}

// problemBuffers holds the buffers problems are written into.
var problemBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
