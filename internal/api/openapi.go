package api

import (
	_ "embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5/static"
	"github.com/swaggest/swgui/v5emb"
)

// OpenAPI is the OpenAPI 3.1 description of this API: hand-written, the
// source of truth, kept in step with the routes by this package's tests.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPIContentType is the media type of GET /openapi.yaml (RFC 9512).
const openAPIContentType = "application/yaml"

func (s *server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", openAPIContentType)
	_, _ = w.Write(OpenAPI)
}

// docsHandler serves Swagger UI at /docs and its files under /docs/, all
// from the binary (swgui's v5emb), reading the description from
// /openapi.yaml. Swagger UI's online validator stays off (validatorUrl
// null, swgui's default, set here explicitly so an upgrade cannot turn it on).
// There is no /docs/ page: a path with a trailing slash is an error under
// Redocly's recommended rules (no-path-trailing-slash). docsHead adds the
// page's own style and plugin (docs_head.html).
func docsHandler() http.Handler {
	return v5emb.NewHandlerWithConfig(swgui.Config{
		Title:       "inventory API",
		SwaggerJSON: "/openapi.yaml",
		BasePath:    "/docs/",
		SettingsUI: map[string]string{
			"validatorUrl": "null",
			// swgui's own plugin list, and ours.
			"plugins": "[SwaggerUIBundle.plugins.DownloadUrl, inventoryDocsPlugin]",
		},
		AppendHead: docsHead,
	})
}

// docsHead is what the docs page adds to Swagger UI: the problems
// section drawn full width, Markdown tables with padded, ruled cells, and
// an optional token shown as optional (not as an admin call's padlock).
//
//go:embed docs_head.html
var docsHead template.HTML

// docsAssets are the files the docs page loads from /docs/: the embedded
// files, without the .gz their compressed copies are stored under.
func docsAssets() (map[string]bool, error) {
	entries, err := fs.ReadDir(static.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("list the docs assets: %w", err)
	}
	assets := map[string]bool{}
	for _, e := range entries {
		assets[strings.TrimSuffix(e.Name(), ".gz")] = true
	}
	return assets, nil
}

// handleDocsAsset serves one of docsAssets, or a not-found problem (the
// file server's own 404 would be plain text).
func (s *server) handleDocsAsset(w http.ResponseWriter, r *http.Request) {
	if !s.docsAssets[chi.URLParam(r, "asset")] {
		s.writeProblem(w, r, fmt.Errorf("%w: %s", errRouteNotFound, r.URL.Path))
		return
	}
	s.docs.ServeHTTP(w, r)
}
