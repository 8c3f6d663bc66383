// Package spectest checks HTTP traffic against the service's OpenAPI
// description: every request and answer that passes through a Checker is
// validated, and the (method, path, status) of each is recorded so that a
// test suite can tell which documented answers it never saw.
package spectest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Load parses and validates an OpenAPI 3.1 description. kin-openapi picks
// JSON Schema 2020-12 validation from the document's openapi: 3.1.x field.
func Load(spec []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI description: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("the OpenAPI description is version %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("validate the OpenAPI description: %w", err)
	}
	return doc, nil
}

// Triple is one documented or observed answer: an operation's method, its
// path template as the description spells it, and a status.
type Triple struct {
	Method string
	Path   string
	Status int
}

func (t Triple) String() string { return fmt.Sprintf("%s %s %d", t.Method, t.Path, t.Status) }

// Checker validates traffic against one description and records what it saw.
type Checker struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[Triple]int
}

// New returns a Checker for spec.
func New(spec []byte) (*Checker, error) {
	doc, err := Load(spec)
	if err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the OpenAPI description: %w", err)
	}
	return &Checker{doc: doc, router: router, seen: map[Triple]int{}}, nil
}

// Doc is the loaded description.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// Documented lists every (method, path, status) the description documents.
func (c *Checker) Documented() []Triple {
	var all []Triple
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				var status int
				if _, err := fmt.Sscan(code, &status); err != nil {
					continue // "default" or a range like "5XX": not one status
				}
				all = append(all, Triple{method, path, status})
			}
		}
	}
	sortTriples(all)
	return all
}

// Seen lists every documented (method, path, status) that went through c.
func (c *Checker) Seen() []Triple {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []Triple
	for t := range c.seen {
		all = append(all, t)
	}
	sortTriples(all)
	return all
}

// Unseen lists the documented triples that never went through c, leaving
// out those in excluded.
func (c *Checker) Unseen(excluded map[Triple]string) []Triple {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []Triple
	for _, t := range c.Documented() {
		if _, ok := excluded[t]; !ok && c.seen[t] == 0 {
			missing = append(missing, t)
		}
	}
	return missing
}

func sortTriples(ts []Triple) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		return a.Status < b.Status
	})
}

// Check validates one exchange: req (whose body was reqBody) answered with
// status, header and body. A request the description routes is validated,
// and so is its answer, whose status must be documented; a request that the
// description calls invalid must have been refused with a 4xx. A request to
// a path or method the description does not have must have been answered
// with the not-found (404) or method-not-allowed (405) problem.
func (c *Checker) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	ctx := context.Background()
	req = req.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	what := fmt.Sprintf("%s %s answered %d", req.Method, req.URL.RequestURI(), status)

	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return c.checkUnrouted(what, err, status, header, body)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	var errs []error
	if reqErr != nil && (status < 400 || status > 499) {
		errs = append(errs, fmt.Errorf("the description refuses the request (%v) but the service answered %d", reqErr, status))
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("answer: %w", err))
	}
	if len(header.Values("X-Request-ID")) != 1 {
		errs = append(errs, fmt.Errorf("answer has %d X-Request-ID headers, want exactly 1", len(header.Values("X-Request-ID"))))
	}
	c.mu.Lock()
	c.seen[Triple{route.Method, route.Path, status}]++
	c.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w\nbody: %.500s", what, err, body)
	}
	return nil
}

// checkUnrouted checks the answer to a request the description has no
// operation for.
func (c *Checker) checkUnrouted(what string, routeErr error, status int, header http.Header, body []byte) error {
	want := map[int]string{404: "NotFound", 405: "MethodNotAllowed"}[status]
	if want == "" {
		return fmt.Errorf("%s: the description has no such operation (%v), want 404 or 405", what, routeErr)
	}
	ref := c.doc.Components.Responses[want]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("%s: the description has no components.responses.%s", what, want)
	}
	media := ref.Value.Content.Get(header.Get("Content-Type"))
	if media == nil {
		return fmt.Errorf("%s: content type %q, want %v", what, header.Get("Content-Type"), slices.Sorted(maps.Keys(ref.Value.Content)))
	}
	for name, h := range ref.Value.Headers {
		if h.Value.Required && header.Get(name) == "" {
			return fmt.Errorf("%s: no %s header", what, name)
		}
	}
	value, err := decodeJSON(body)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := media.Schema.Value.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("%s: body does not match components.responses.%s: %w\nbody: %.500s", what, want, err, body)
	}
	return nil
}

// bearerPresent accepts a request for an operation with bearer security
// when it carries a bearer token at all: whether it is the right one is the
// service's business, answered 401 or 403 (which Check allows for a request
// the description refuses).
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return fmt.Errorf("security scheme %s %s is not checked here", in.SecurityScheme.Type, in.SecurityScheme.Scheme)
	}
	scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// Reporter is told of every failed check; a *testing.T is one.
type Reporter interface {
	Errorf(format string, args ...any)
}

// Handler wraps h so that every exchange it serves is checked; a failed
// check is reported to t.
func (c *Checker) Handler(t Reporter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("spectest: read the body of %s %s: %v", r.Method, r.URL, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if err := c.Check(r, reqBody, rec.status, w.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("spectest: %v", err)
		}
	})
}

// recorder passes an answer through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Transport wraps rt (nil: http.DefaultTransport) so that every exchange a
// client makes through it is checked; a failed check is reported to t. Use
// it for a server the test cannot wrap, such as a fleet behind nginx.
func (c *Checker) Transport(t Reporter, rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		var reqBody []byte
		if req.Body != nil {
			var err error
			if reqBody, err = io.ReadAll(req.Body); err != nil {
				return nil, fmt.Errorf("spectest: read the request body: %w", err)
			}
			_ = req.Body.Close()
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("spectest: read the answer to %s %s: %w", req.Method, req.URL, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err := c.Check(req, reqBody, resp.StatusCode, resp.Header, body); err != nil {
			t.Errorf("spectest: %v", err)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func decodeJSON(body []byte) (any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return v, nil
}
