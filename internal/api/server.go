// Package api is the HTTP interface of the inventory service: sales and
// holds, the orders of holds, product stock, the fleet's default strategy,
// health and metrics.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"inventory/internal/inventory"
	"inventory/internal/metrics"
	"inventory/internal/postgres"
	"inventory/internal/productcache"
	"inventory/internal/settings"
	"inventory/internal/stock"
	"inventory/internal/watchdog"
)

// Config is what the HTTP layer needs; every field but AdminToken is required.
type Config struct {
	// Sellers holds one seller per strategy name. A strategy that needs a
	// lock service of its own (inventory.Info.Needs) may be missing: it is then
	// listed as unavailable and its sales get 503 strategy-unavailable.
	Sellers map[string]inventory.Seller
	Store   *postgres.Store
	Redis   redis.UniversalClient
	// Default is the fleet's default strategy, used when a sale names none.
	Default *settings.Strategy
	// Instance names this replica in every response.
	Instance string
	// AdminToken guards the admin calls; empty refuses them all with 403.
	AdminToken string
	// MaxQuantity is the most units one order may buy.
	MaxQuantity int64
	Logger      *slog.Logger
	Metrics     *metrics.Metrics
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// SoldOut, when set, is this replica's memory of sold-out products
	// (stock.SoldOut): a restock through this replica forgets its mark at
	// once, before the announcement reaches the other replicas.
	SoldOut *stock.SoldOut
	// Holds, when set, is the log of lock holds the strategies of this
	// replica record (stock.Deps.Holds), served by GET
	// /products/{id}/holds; nil answers every product with no holds.
	Holds *stock.HoldLog
	// Circuits, when set, is the fleet's sale circuits (watchdog): a sale of
	// a product whose circuit is open gets 503 circuit-open, and
	// POST /products/{id}/circuit closes it. nil: no circuits.
	Circuits *watchdog.Circuits
	// Notes, by strategy name, are added to a strategy's description in
	// GET /strategies: what this deployment changes about it (redlock's
	// servers when Redis is a cluster, say). nil: none.
	Notes map[string]string
	// Tracing makes every request a server span (OpenTelemetry's global
	// provider, W3C trace context read from the request) with a "sale"
	// span under each sale; false: no tracing work at all.
	Tracing bool
	// Readiness, when set, answers GET /readyz from memory: Ready reports
	// what a loop in the background last learnt of Postgres and Redis
	// (metrics.Backends, which cmd/inventory pings on a connection of its
	// own), so a crowd probing readiness costs the backends nothing and
	// takes no connection a sale needs. nil: each GET /readyz pings Store
	// and Redis itself (for tests that run no such loop).
	Readiness interface{ Ready() error }
	// ProductCache, when set, answers the anonymous GET /products/{id}
	// from the replicas' shared cache, within its staleness bound (with
	// an Age header); a read with the admin token or Cache-Control:
	// no-cache reads Postgres, and a restock drops the product's entry.
	// nil: every read is Postgres's.
	ProductCache *productcache.Cache
	// Orders reads orders and takes the steps of their life (GET
	// /orders/{id}, POST /orders/{id}/pay, …): cmd/inventory gives a
	// stock.Orders whose Lock is the order lock it was configured with.
	// nil: a stock.Orders on Store that takes no lock (Postgres's guarded
	// writes decide every step all the same).
	Orders Orders
	// ReadRate, when above 0, is how many anonymous reads (GET
	// /products/{id}, its rounds, /orders/{id}, /live) this replica
	// answers per second,
	// with a burst of as many: a read over it waits up to readWait for its
	// turn, then gets 429 too-many-requests. A crowd of readers then takes
	// no more of the machine than this, whatever its size. 0: no limit.
	ReadRate float64
}

type server struct {
	Config
	log       *slog.Logger
	adminHash [sha256.Size]byte
	// docs serves the docs page and docsAssets, its files.
	docs       http.Handler
	docsAssets map[string]bool
	// started and answers are this replica's own figures for GET /live:
	// when it started, and its answers to sales since then.
	started time.Time
	answers tally
	// rounds is the JSON of the products' rounds of GET /live, made once
	// per read of them.
	rounds roundsJSON
	// reads paces the anonymous reads (Config.ReadRate); nil: no limit.
	reads *rate.Limiter
	// restocker makes the restocks of PUT /products/{id}.
	restocker stock.Restocker
}

// NewServer returns the service's HTTP handler.
func NewServer(cfg Config) (http.Handler, error) {
	switch {
	case cfg.Store == nil, cfg.Redis == nil, cfg.Default == nil, cfg.Logger == nil, cfg.Metrics == nil, cfg.Gatherer == nil:
		return nil, fmt.Errorf("api.NewServer: Store, Redis, Default, Logger, Metrics and Gatherer are required")
	case cfg.Instance == "":
		return nil, fmt.Errorf("api.NewServer: Instance is required")
	case cfg.MaxQuantity < 1:
		return nil, fmt.Errorf("api.NewServer: MaxQuantity must be at least 1, got %d", cfg.MaxQuantity)
	}
	for _, info := range inventory.Strategies {
		if cfg.Sellers[info.Name] == nil && info.Needs == "" {
			return nil, fmt.Errorf("api.NewServer: no seller for strategy %q", info.Name)
		}
	}
	assets, err := docsAssets()
	if err != nil {
		return nil, fmt.Errorf("api.NewServer: %w", err)
	}
	s := &server{Config: cfg, log: cfg.Logger, adminHash: sha256.Sum256([]byte(cfg.AdminToken)),
		docs: docsHandler(), docsAssets: assets, started: time.Now().UTC(),
		restocker: stock.Restocker{Store: cfg.Store, Redis: cfg.Redis, Marks: cfg.SoldOut}}
	if s.Orders == nil {
		s.Orders = stock.Orders{Store: cfg.Store, Returns: s.restocker, Instance: cfg.Instance}
	}
	if cfg.ReadRate > 0 {
		s.reads = rate.NewLimiter(rate.Limit(cfg.ReadRate), max(1, int(cfg.ReadRate)))
	}
	cfg.Metrics.Strategies(inventory.Names()...)
	r := chi.NewRouter()
	r.Use(s.instanceHeader, withRequestID, s.requestIDHeader, s.recoverer, s.observe)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, fmt.Errorf("%w: %s", errRouteNotFound, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		allowed := allowedMethods(r)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeProblem(w, r, fmt.Errorf("%w: %s %s (allowed: %s)", errMethodNotAllowed, r.Method, r.URL.Path, strings.Join(allowed, ", ")))
	})
	s.routes(r)
	if cfg.Tracing {
		return otelhttp.NewHandler(r, "inventory"), nil
	}
	return r, nil
}

// allowedMethods lists the methods that do have a route for r's path.
func allowedMethods(r *http.Request) []string {
	var allowed []string
	routes := chi.RouteContext(r.Context()).Routes
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes != nil && routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

func (s *server) instanceHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Instance", s.Instance)
		next.ServeHTTP(w, r)
	})
}

// requestIDHeader answers with the request's id, exactly once (the
// caller's X-Request-ID when withRequestID accepted it, or ours).
func (s *server) requestIDHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-ID", requestID(r))
		next.ServeHTTP(w, r)
	})
}

// requestID is the id withRequestID gave r; "" outside that middleware.
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// recoverer turns a panic into a logged 500 problem instead of a dropped connection.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic", "request_id", requestID(r), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				s.writeProblem(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// observe records each request's route, status and latency.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched" // keeps label values bounded: never the raw path
		}
		s.Metrics.HTTPRequest(route, r.Method, ww.Status(), time.Since(start))
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
	})
}

// requireAdmin lets a request through only with the admin bearer token.
func (s *server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkAdmin(r); err != nil {
			s.writeProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkAdmin is the one admin check: nil when r carries the admin bearer
// token, compared in constant time (hashes first, so the length does not
// leak either); errAdminDisabled when no token is configured; else
// errUnauthorized.
func (s *server) checkAdmin(r *http.Request) error {
	if s.AdminToken == "" {
		return errAdminDisabled
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	given := sha256.Sum256([]byte(token))
	if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(given[:], s.adminHash[:]) != 1 {
		return errUnauthorized
	}
	return nil
}

// ready reports whether Postgres and Redis answer: from Readiness's last
// background check when there is one, else by pinging both.
func (s *server) ready(ctx context.Context) error {
	if s.Readiness != nil {
		if err := s.Readiness.Ready(); err != nil {
			return fmt.Errorf("%w: %w", inventory.ErrUnavailable, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: postgres: %v", inventory.ErrUnavailable, err)
	}
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: redis: %v", inventory.ErrUnavailable, err)
	}
	return nil
}
