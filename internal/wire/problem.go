package wire

import "strconv"

// ProblemTypePrefix starts the type of every problem the service and its
// nginx write: "urn:inventory:problem:" + slug, e.g.
// "urn:inventory:problem:sold-out" (RFC 9457 §3.1.1: a stable type URI).
const ProblemTypePrefix = "urn:inventory:problem:"

// Problem is the application/problem+json body (RFC 9457) of every answer
// other than 2xx.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int64  `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request's path (absent from nginx's own problems).
	Instance string `json:"instance,omitempty"`
	// RequestID is the request's id, as in X-Request-ID.
	RequestID string `json:"request_id,omitempty"`
	// LockBreach (extension member) says the database refused a write that
	// the strategy's lock should have made impossible: the lock broke.
	LockBreach bool `json:"lock_breach,omitempty"`
	// State (extension member) is the order's state when a step of its
	// life was refused (order-expired, order-state); absent otherwise.
	State string `json:"state,omitempty"`
}

// AppendJSON appends p as encoding/json's Encoder writes it (the same
// bytes, newline included), without reflection: the crowd after a
// sell-out gets thousands of problems a second.
func (p Problem) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = AppendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = AppendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, p.Status, 10)
	for _, f := range [...]struct{ name, value string }{
		{`,"detail":`, p.Detail}, {`,"instance":`, p.Instance}, {`,"request_id":`, p.RequestID},
	} {
		if f.value != "" {
			b = append(b, f.name...)
			b = AppendString(b, f.value)
		}
	}
	if p.LockBreach {
		b = append(b, `,"lock_breach":true`...)
	}
	if p.State != "" {
		b = append(b, `,"state":`...)
		b = AppendString(b, p.State)
	}
	return append(b, "}\n"...)
}
