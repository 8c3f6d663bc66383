// Package tracing turns OpenTelemetry tracing on when the standard OTEL_*
// variables ask for it: with OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, spans go over OTLP/HTTP and W3C
// trace context is read from and written to requests; unset, the global
// provider stays OpenTelemetry's no-op one and tracing costs next to
// nothing. Spans are made where the work is (internal/api, internal/stock)
// with Tracer.
package tracing

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is the service's tracer, from the global provider (a no-op until
// Setup turns tracing on).
func Tracer() trace.Tracer { return otel.Tracer("inventory") }

// Enabled reports whether getenv asks for traces to be exported.
func Enabled(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs a tracer provider exporting over OTLP/HTTP (configured by
// the standard OTEL_EXPORTER_OTLP_* variables of the process) and the W3C
// trace-context propagator; call it when Enabled. instance names the
// replica on every span. The returned shutdown flushes the spans still
// buffered.
func Setup(ctx context.Context, instance string) (shutdown func(context.Context) error, err error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "inventory"),
		attribute.String("service.instance.id", instance),
	))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	return tp.Shutdown, nil
}

// Install makes tp the global provider with W3C trace context and baggage
// propagation (tests install one that records).
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}

// Span starts a child span of ctx's span, only when that one is recording:
// with tracing off (or a request not traced) it makes nothing and returns
// ctx and its non-recording span, whose methods do nothing. Set attributes
// on it after checking IsRecording, so that an untraced sale builds none.
func Span(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return Tracer().Start(ctx, name)
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Attempts records on ctx's span (when it is recording) how many tries a
// sale took: optimistic's compare-and-sets, lua's reservations.
func Attempts(ctx context.Context, n int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Int("inventory.attempts", n))
	}
}
