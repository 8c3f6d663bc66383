package client

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"inventory/internal/wire"
)

// TypePrefix starts the type of every problem the service and its nginx
// write: "urn:inventory:problem:" + slug.
const TypePrefix = wire.ProblemTypePrefix

// Problem is the error of every call answered with a status other than
// 2xx: the service's (or nginx's) application/problem+json (RFC 9457)
// decoded, or, for any other body (an nginx page, a proxy's text), the
// status with the body as it came.
type Problem struct {
	// Status is the answer's HTTP status.
	Status int
	// Type is the problem's type, e.g. "urn:inventory:problem:sold-out";
	// empty when the body was not a problem.
	Type   string
	Title  string
	Detail string
	// RequestID is the request's id (request_id, as in X-Request-ID).
	RequestID string
	// LockBreach is set on a 409 or 503 when the database refused a write
	// that the strategy's lock should have made impossible.
	LockBreach bool
	// State is the order's state on a 409 order-expired or order-state
	// (a step of an order's life its state did not allow); empty
	// otherwise.
	State string
	// InstancePath is the problem's "instance" member: the request's path
	// as the service saw it (absent from nginx's own problems).
	InstancePath string
	// Instance is the replica that answered (X-Instance), as in
	// Sale.Instance; empty when nginx answered itself.
	Instance string
	// RetryAfter is the answer's Retry-After in its seconds form (the
	// service's), as given; 0 without one. Retry caps what it honours.
	RetryAfter time.Duration
	// Method and Path are the call's, for the message.
	Method, Path string
	// Body is the body as it came: for an answer that is not a problem,
	// the only account of what went wrong.
	Body string
}

// Slug is the type without TypePrefix, e.g. "sold-out" (a type from
// elsewhere as it is).
func (p *Problem) Slug() string { return strings.TrimPrefix(p.Type, TypePrefix) }

// Error says the call, the status and the problem, e.g. "POST /sale = 409
// Conflict: sold-out: Fewer units are left than this order asks for;
// nothing was sold."
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Method)
	b.WriteByte(' ')
	b.WriteString(p.Path)
	b.WriteString(" = ")
	b.WriteString(strconv.Itoa(p.Status))
	if text := http.StatusText(p.Status); text != "" {
		b.WriteByte(' ')
		b.WriteString(text)
	}
	body := strings.TrimSpace(p.Body)
	switch {
	case p.Type != "":
		b.WriteString(": ")
		b.WriteString(p.Slug())
		if p.Detail != "" {
			b.WriteString(": ")
			b.WriteString(p.Detail)
		}
		if p.LockBreach {
			b.WriteString(" (lock breach)")
		}
	case body != "":
		b.WriteString(" (not a problem): ")
		if len(body) > 300 {
			body = body[:300] + "…"
		}
		b.WriteString(body)
	default:
		b.WriteString(" (empty body)")
	}
	return b.String()
}

// newProblem is the answer resp, whose body was body, to method path.
func newProblem(method, path string, resp *http.Response, body string) *Problem {
	p := &Problem{
		Status:     resp.StatusCode,
		Instance:   resp.Header.Get("X-Instance"),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
		Method:     method,
		Path:       path,
		Body:       body,
	}
	var j wire.Problem
	if !wire.ScanProblem(body, &j) {
		// The answer's own status is the one kept: a body's status of
		// another type must not cost the members that are fine.
		var anyStatus struct {
			wire.Problem
			Status json.RawMessage `json:"status"`
		}
		if json.Unmarshal([]byte(body), &anyStatus) == nil {
			j = anyStatus.Problem
		}
	}
	p.Type, p.Title, p.Detail, p.InstancePath, p.RequestID, p.LockBreach, p.State =
		j.Type, j.Title, j.Detail, j.Instance, j.RequestID, j.LockBreach, j.State
	return p
}

// StatusOf is the HTTP status of the answer to a call that returned err,
// for callers that count answers by status: 200 for nil (whichever 2xx it
// was), a *Problem's status, and 0 when no answer came back.
func StatusOf(err error) int {
	var p *Problem
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &p):
		return p.Status
	}
	return 0
}

// parseRetryAfter reads a Retry-After of delay-seconds; 0 for none, a date
// or anything else.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second
}
