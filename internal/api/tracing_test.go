package api

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"inventory/internal/tracing"
)

// TestTracedSale: with tracing on, a sale under the redis lock is one
// trace, continuing the caller's W3C trace context: the server span named
// after its route, the "sale" span with the strategy, product, outcome and
// fence, and under it the lock wait, the Postgres transaction and its
// commit.
func TestTracedSale(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Install(noop.NewTracerProvider()) })
	f := newFixture(t, adminToken, func(c *Config) { c.Tracing = true })
	f.restock("traced", 5)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := f.do("POST", "/sale?strategy=redis", jsonType, `{"product_id":"traced","quantity":2}`,
		append([]string{"traceparent", "00-" + traceID + "-00f067aa0ba902b7-01"}, admin...)...)
	if r.status != 200 {
		t.Fatalf("POST /sale = %d %s", r.status, r.raw)
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
		if got := s.SpanContext().TraceID().String(); got != traceID {
			t.Errorf("span %q is in trace %s, want the caller's %s", s.Name(), got, traceID)
		}
	}
	parentOf := func(child, parent string) {
		t.Helper()
		c, p := spans[child], spans[parent]
		if c == nil || p == nil {
			t.Errorf("spans %q and %q: want both, got %v", child, parent, names(spans))
			return
		}
		if c.Parent().SpanID() != p.SpanContext().SpanID() {
			t.Errorf("span %q's parent is %s, want %q (%s)", child, c.Parent().SpanID(), parent, p.SpanContext().SpanID())
		}
	}
	parentOf("sale", "POST /sale")
	parentOf("lock.acquire", "sale")
	parentOf("postgres.transaction", "sale")
	parentOf("postgres.commit", "postgres.transaction")
	if s := spans["sale"]; s != nil {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		for k, want := range map[attribute.Key]string{"inventory.strategy": "redis", "inventory.product_id": "traced", "inventory.outcome": "ok"} {
			if got := attrs[k].AsString(); got != want {
				t.Errorf("sale span %s = %q, want %q", k, got, want)
			}
		}
		if attrs["inventory.quantity"].AsInt64() != 2 || attrs["inventory.remaining"].AsInt64() != 3 || attrs["inventory.fence"].AsInt64() < 1 {
			t.Errorf("sale span attributes %v: want quantity 2, remaining 3 and the lock's fence", s.Attributes())
		}
	}
	if s := spans["lock.acquire"]; s != nil && !strings.Contains(attrString(s), "inventory.fence") {
		t.Errorf("lock.acquire span attributes %v: want the fence it was granted", s.Attributes())
	}
}

// TestUntracedSaleMakesNoSpans: with tracing off (the default), a sale
// makes no span even when a recording provider is installed.
func TestUntracedSaleMakesNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Install(noop.NewTracerProvider()) })
	f := newFixture(t, adminToken)
	f.restock("untraced", 5)
	if r := f.do("POST", "/sale?strategy=redis", jsonType, `{"product_id":"untraced","quantity":1}`, admin...); r.status != 200 {
		t.Fatalf("POST /sale = %d %s", r.status, r.raw)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans with tracing off, want none", n)
	}
}

func names(spans map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for n := range spans {
		out = append(out, n)
	}
	return out
}

func attrString(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, kv := range s.Attributes() {
		b.WriteString(string(kv.Key) + "=" + kv.Value.Emit() + " ")
	}
	return b.String()
}
