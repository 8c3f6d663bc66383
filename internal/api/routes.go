package api

import (
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"inventory/internal/inventory"
)

// routes is the whole API on one screen.
func (s *server) routes(r chi.Router) {
	r.Get("/", s.handleIndex)
	r.With(s.readBudget).Get("/live", s.handleLive)

	r.Post("/sale", s.handleSale)
	r.Post("/products/{id}/sale", s.handleProductSale)

	r.With(s.readBudget).Get("/orders/{id}", s.handleGetOrder)
	r.Post("/orders/{id}/pay", s.handleOrderStep(inventory.Pay))
	r.Post("/orders/{id}/cancel", s.handleOrderStep(inventory.Cancel))
	r.Post("/orders/{id}/refund", s.handleOrderStep(inventory.Refund))
	r.Post("/orders/{id}/ship", s.handleOrderStep(inventory.Ship))

	r.With(s.readBudget).Get("/products/{id}", s.handleGetProduct)
	r.With(s.readBudget).Get("/products/{id}/rounds/{round}", s.handleGetRound)
	r.With(s.requireAdmin).Put("/products/{id}", s.handlePutProduct)
	r.With(s.requireAdmin).Get("/products/{id}/holds", s.handleGetHolds)
	r.With(s.requireAdmin).Post("/products/{id}/circuit", s.handleCloseCircuit)

	r.Get("/strategies", s.handleListStrategies)
	r.Get("/strategy", s.handleGetStrategy)
	r.With(s.requireAdmin).Put("/strategy", s.handlePutStrategy)

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method("GET", "/metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	r.With(s.requireAdmin).Get("/debug/pprof/{profile}", s.handleProfile)

	r.Get("/openapi.yaml", s.handleOpenAPI)
	r.Method("GET", "/docs", s.docs)
	r.Get("/docs/{asset}", s.handleDocsAsset)
}
