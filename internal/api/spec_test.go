package api

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"inventory/internal/api/spectest"
	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/metrics"
	"inventory/internal/postgres"
	"inventory/internal/settings"
	"inventory/internal/stock"
)

// checker is the one spectest.Checker of this test binary: it validates
// every exchange of every fixture and records which documented answers the
// tests produced.
var checker = sync.OnceValues(func() (*spectest.Checker, error) { return spectest.New(OpenAPI) })

func specChecker(t testing.TB) *spectest.Checker {
	t.Helper()
	c, err := checker()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// notExercisedHere are the documented answers this package's tests cannot
// produce, each with the reason and where it is covered instead.
var notExercisedHere = map[spectest.Triple]string{
	{Method: "POST", Path: "/sale", Status: 502}: "nginx's own answer when no replica can be reached: produced by the real nginx config " +
		"and validated against openapi.yaml in nginx (TestNginxUnreachableReplicasAreProblems) and internal/fleet (TestEdge/ReplicasGone)",
	{Method: "POST", Path: "/sale", Status: 504}: "nginx's own answer when a replica does not answer in time: produced by the real nginx config " +
		"and validated against openapi.yaml in nginx (TestNginxUnreachableReplicasAreProblems)",
	{Method: "POST", Path: "/products/{id}/sale", Status: 502}: "nginx's own answer, the same as for POST /sale (the same error pages serve every location)",
	{Method: "POST", Path: "/products/{id}/sale", Status: 504}: "nginx's own answer, the same as for POST /sale (the same error pages serve every location)",
}

// fullRun reports whether every test of the package ran (no -run or -skip
// filter), so that an unseen answer means a missing test.
func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// checkSpecCoverage reports to w every documented answer that no test
// produced and returns the exit code: 0 when there is none.
func checkSpecCoverage(w io.Writer) int {
	c, err := checker()
	if err != nil {
		fmt.Fprintln(w, err)
		return 1
	}
	documented := c.Documented()
	unseen := c.Unseen(notExercisedHere)
	if len(unseen) > 0 {
		fmt.Fprintf(w, "FAIL: %d of the %d answers documented in openapi.yaml were never produced by a test:\n", len(unseen), len(documented))
		for _, t := range unseen {
			fmt.Fprintln(w, "\t", t)
		}
		return 1
	}
	fmt.Fprintf(w, "openapi.yaml: %d of the %d documented answers were produced and validated here; the other %d are nginx's (notExercisedHere)\n",
		len(documented)-len(notExercisedHere), len(documented), len(notExercisedHere))
	return 0
}

func TestSpecLoadsAndValidates(t *testing.T) {
	c := specChecker(t)
	if got := c.Doc().OpenAPI; !strings.HasPrefix(got, "3.1.") {
		t.Errorf("openapi.yaml is OpenAPI %s, want 3.1", got)
	}
	for triple := range notExercisedHere {
		if !slices.Contains(c.Documented(), triple) {
			t.Errorf("notExercisedHere names %s, which openapi.yaml does not document", triple)
		}
	}
}

func TestEveryRouteIsDescribedAndEveryDescribedOperationRouted(t *testing.T) {
	f := newFixture(t, adminToken)
	routed := map[string]bool{}
	err := chi.Walk(f.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk: %v", err)
	}
	described := map[string]bool{}
	for path, item := range specChecker(t).Doc().Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	for _, op := range slices.Sorted(maps.Keys(routed)) {
		if !described[op] {
			t.Errorf("route %s is not in openapi.yaml", op)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(described)) {
		if !routed[op] {
			t.Errorf("openapi.yaml describes %s, which is not routed", op)
		}
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/openapi.yaml", "", "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/yaml" || r.raw != string(OpenAPI) {
		t.Errorf("GET /openapi.yaml = %d %s (%d bytes), want 200 application/yaml with the embedded openapi.yaml", r.status, r.header.Get("Content-Type"), len(r.raw))
	}
}

// assetRef finds what a page loads: src= and href= values.
var assetRef = regexp.MustCompile(`(?:src|href)="([^"]*)"`)

func TestDocsAreServedFromTheBinary(t *testing.T) {
	f := newFixture(t, adminToken)
	for _, path := range []string{"/docs"} {
		r := f.do("GET", path, "", "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s = %d %s, want 200 text/html", path, r.status, r.header.Get("Content-Type"))
		}
		if !strings.Contains(r.raw, `"/openapi.yaml"`) || !strings.Contains(r.raw, "validatorUrl: null") {
			t.Errorf("GET %s: the page does not point at /openapi.yaml with the validator off:\n%s", path, r.raw)
		}
		for _, cdn := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "cdn.", "unpkg", "jsdelivr", "cdnjs"} {
			if strings.Contains(r.raw, cdn) {
				t.Errorf("GET %s: the page has %q; everything must come from the binary", path, cdn)
			}
		}
		refs := assetRef.FindAllStringSubmatch(r.raw, -1)
		if len(refs) < 3 {
			t.Errorf("GET %s: the page loads %d files, want its scripts and styles", path, len(refs))
		}
		for _, ref := range refs {
			if !strings.HasPrefix(ref[1], "/docs/") {
				t.Errorf("GET %s: the page loads %q, want a file under /docs/", path, ref[1])
				continue
			}
			if a := f.do("GET", ref[1], "", ""); a.status != 200 || len(a.raw) == 0 {
				t.Errorf("GET %s (loaded by %s) = %d with %d bytes, want 200 with the file", ref[1], path, a.status, len(a.raw))
			}
		}
	}
	// The page carries its own style and plugin (docs_head.html): padded
	// Markdown tables (Swagger UI draws a 3.1 description's header cells
	// with no side padding) and an optional token shown as optional.
	// TestDocsPageInABrowser checks what they do.
	if r := f.do("GET", "/docs", "", ""); !strings.Contains(r.raw, ".swagger-ui .renderedMarkdown table thead tr th") ||
		!strings.Contains(r.raw, "SwaggerUIBundle.plugins.DownloadUrl, inventoryDocsPlugin]") || !strings.Contains(r.raw, "function inventoryDocsPlugin()") {
		t.Errorf("GET /docs: the page lacks docs_head.html's table style or its plugin")
	}
	// No trailing-slash alias (Redocly's no-path-trailing-slash).
	for _, path := range []string{"/docs/", "/docs/nope.js", "/docs/swagger-ui.css.gz"} {
		if r := f.do("GET", path, "", ""); r.status != 404 || r.body["type"] != problemTypePrefix+"not-found" {
			t.Errorf("GET %s = %d %s, want 404 not-found", path, r.status, r.raw)
		}
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// newDownFixture is a server whose Postgres and Redis do not answer: their
// addresses refuse connections.
func newDownFixture(t *testing.T) *fixture {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@"+deadAddr(t)+"/inventory?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	store := postgres.NewStore(pool, postgres.Limits{})
	deps := stock.Deps{Store: store, Redis: rdb, Instance: "test-down", Lockers: testLockers(t, pool, rdb, store, lock.Options{})}
	sellers := map[string]inventory.Seller{}
	for _, name := range inventory.Names() {
		s, err := stock.New(name, deps)
		if errors.Is(err, inventory.ErrNotConfigured) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sellers[name] = s
	}
	def := settings.NewStrategy(pool, func(n string) error { _, err := inventory.Lookup(n); return err }, settings.Options{})
	h, err := NewServer(Config{Sellers: sellers, Store: store, Redis: rdb, Default: def, Instance: "test-down",
		AdminToken: adminToken, MaxQuantity: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m, Gatherer: reg})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	srv := httptest.NewServer(specChecker(t).Handler(t, h))
	t.Cleanup(srv.Close)
	return &fixture{t: t, url: srv.URL, handler: h, store: store, rdb: rdb}
}

func TestBackendsDownAre503WithRetryAfter(t *testing.T) {
	f := newDownFixture(t)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""},
		{"GET", "/products/sku-1", ""},
		{"GET", "/products/sku-1/rounds/1", ""},
		{"GET", "/live", ""},
		{"PUT", "/products/sku-1", `{"quantity":5}`},
		{"GET", "/strategy", ""},
		{"PUT", "/strategy", `{"strategy":"atomic"}`},
		{"POST", "/sale", `{"product_id":"sku-1","quantity":1}`},
	} {
		r := f.do(tc.method, tc.path, jsonType, tc.body, admin...)
		if r.status != 503 || r.body["type"] != problemTypePrefix+"unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with Postgres and Redis down = %d Retry-After=%q %s, want 503 unavailable with Retry-After",
				tc.method, tc.path, r.status, r.header.Get("Retry-After"), r.raw)
		}
		if strings.Contains(r.raw, "127.0.0.1") || strings.Contains(r.raw, "refused") {
			t.Errorf("%s %s: the answer %s tells the backend's error", tc.method, tc.path, r.raw)
		}
	}
	if r := f.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Errorf("GET /healthz with the backends down = %d %s, want 200 (liveness needs no backend)", r.status, r.raw)
	}
}

func TestAdminBodiesAreCheckedLikeSales(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 5)
	big := `{"quantity":1,"name":"` + strings.Repeat("x", 5000) + `"}`
	for _, tc := range []struct {
		name, method, path, contentType, body string
		header                                []string
		status                                int
		problem                               string
	}{
		{"restock, text body", "PUT", "/products/sku-1", "text/plain", `{"quantity":1}`, admin, 415, "unsupported-media-type"},
		{"restock, oversized body", "PUT", "/products/sku-1", jsonType, big, admin, 413, "body-too-large"},
		{"switch, text body", "PUT", "/strategy", "text/plain", `{"strategy":"none"}`, admin, 415, "unsupported-media-type"},
		{"switch, oversized body", "PUT", "/strategy", jsonType, big, admin, 413, "body-too-large"},
		{"switch, no token", "PUT", "/strategy", jsonType, `{"strategy":"none"}`, nil, 401, "unauthorized"},
		{"switch, wrong token", "PUT", "/strategy", jsonType, `{"strategy":"none"}`, []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
	} {
		r := f.do(tc.method, tc.path, tc.contentType, tc.body, tc.header...)
		if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem {
			t.Errorf("%s: %s %s = %d %s, want %d %s", tc.name, tc.method, tc.path, r.status, r.raw, tc.status, tc.problem)
		}
	}
	if p := f.product("sku-1"); p.Quantity != 5 || p.Round != 1 {
		t.Errorf("refused admin calls changed the product: %+v", p)
	}
	if r := f.do("GET", "/strategy", "", ""); r.body["strategy"] != inventory.Atomic {
		t.Errorf("refused switches changed the default: %s", r.raw)
	}
}

// TestDescriptionKeepsRedoclysRecommendedRules checks, offline, the rules
// of Redocly's recommended ruleset (`npx @redocly/cli lint
// internal/api/openapi.yaml`) that the description once broke or that are
// cheap to check here; kin-openapi's validation (TestSpecLoadsAndValidates)
// covers the structure. The warnings Redocly still gives are kept on
// purpose: info-license (the project has no license to name),
// operation-4xx-response on the GETs that take no input (the service has no
// 4xx of its own for them; nginx's 400, 408 and 414 are in the problems tag's table,
// not repeated on every operation), and no-unused-components for
// MethodNotAllowed (the answer to a method no operation has; spectest
// validates such answers against it by name).
func TestDescriptionKeepsRedoclysRecommendedRules(t *testing.T) {
	doc := specChecker(t).Doc()
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		declared[tag.Name] = true
		if tag.Description == "" {
			t.Errorf("tag %q has no description (tag-description)", tag.Name)
		}
	}
	ids := map[string]string{}
	for _, path := range doc.Paths.InMatchingOrder() {
		if path != "/" && strings.HasSuffix(path, "/") {
			t.Errorf("path %s ends with a slash (no-path-trailing-slash)", path)
		}
		for method, op := range doc.Paths.Value(path).Operations() {
			what := method + " " + path
			// Public operations say so with `security: []`: an absent
			// list would mean "whatever the document's default is".
			if op.Security == nil {
				t.Errorf("%s declares no security, want `security: []` if it is public (security-defined)", what)
			}
			if op.OperationID == "" {
				t.Errorf("%s has no operationId (operation-operationId)", what)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %q (operation-operationId-unique)", what, other, op.OperationID)
			}
			ids[op.OperationID] = what
			if op.Summary == "" {
				t.Errorf("%s has no summary (operation-summary)", what)
			}
			for _, tag := range op.Tags {
				if !declared[tag] {
					t.Errorf("%s has tag %q, which the top-level tags do not declare (operation-tag-defined)", what, tag)
				}
			}
			if op.Responses == nil || op.Responses.Len() == 0 {
				t.Errorf("%s documents no response (operation-2xx-response)", what)
			}
		}
	}

	// no-required-schema-properties-undefined: a schema that requires a
	// property defines it (unless it composes others, which may).
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, ref *openapi3.SchemaRef)
	walk = func(where string, ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) == 0 {
			for _, name := range s.Required {
				if _, ok := s.Properties[name]; !ok {
					t.Errorf("%s requires %q but does not define it (no-required-schema-properties-undefined)", where, name)
				}
			}
		}
		for name, p := range s.Properties {
			walk(where+"."+name, p)
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				walk(where, sub)
			}
		}
		walk(where+"[]", s.Items)
	}
	for name, ref := range doc.Components.Schemas {
		walk("components.schemas."+name, ref)
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			for status, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for mt, media := range resp.Value.Content {
					walk(method+" "+path+" "+status+" "+mt, media.Schema)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for mt, media := range op.RequestBody.Value.Content {
					walk(method+" "+path+" request "+mt, media.Schema)
				}
			}
		}
	}
}

// problemRow is a row of the problems table: `slug` | status | when.
var problemRow = regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (\\d{3}) \\|")

// TestProblemsAreTheLastSection: /docs opens on the endpoints, so the
// description's opening (info) has no table; the problem types are the
// last tag's, "problems", which has no operation: a row for every type
// of components.schemas.Problem, and none other, in the order of status.
func TestProblemsAreTheLastSection(t *testing.T) {
	doc := specChecker(t).Doc()
	if strings.Contains(doc.Info.Description, "|---") {
		t.Errorf("info.description has a table: it is drawn above every endpoint")
	}
	last := doc.Tags[len(doc.Tags)-1]
	if last.Name != "problems" {
		t.Fatalf("the last tag is %q, want problems", last.Name)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if slices.Contains(op.Tags, "problems") {
				t.Errorf("%s %s is tagged problems, a section of the problem types only", method, path)
			}
		}
	}
	var enum []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		enum = append(enum, strings.TrimPrefix(v.(string), problemTypePrefix))
	}
	var rows []string
	status := 0
	for _, m := range problemRow.FindAllStringSubmatch(last.Description, -1) {
		rows = append(rows, m[1])
		s, _ := strconv.Atoi(m[2])
		if s < status {
			t.Errorf("the problems table lists %s (%d) after a %d", m[1], s, status)
		}
		status = s
	}
	slices.Sort(enum)
	slices.Sort(rows)
	if !slices.Equal(rows, enum) {
		t.Errorf("the problems table lists %q,\nProblem.type has %q", rows, enum)
	}
}
