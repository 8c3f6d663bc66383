package api

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	runtimepprof "runtime/pprof"

	"github.com/go-chi/chi/v5"
)

// handleProfile serves one of Go's profiles (net/http/pprof) by name; the
// route is for the admin only.
func (s *server) handleProfile(w http.ResponseWriter, r *http.Request) {
	switch name := chi.URLParam(r, "profile"); name {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	default:
		if runtimepprof.Lookup(name) == nil {
			s.writeProblem(w, r, fmt.Errorf("%w: no profile %q", errRouteNotFound, name))
			return
		}
		pprof.Handler(name).ServeHTTP(w, r)
	}
}
