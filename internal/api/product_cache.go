package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"inventory/internal/inventory"
)

// readProduct is what GET /products/{id} answers: the product, and how
// long ago Postgres had it so (the Age header). A read with the admin
// token, or one that asks for no cached answer (exactness), reads
// Postgres; every other read goes through the product cache, within its
// bound (Config.ProductCache; without one, every read is exact).
func (s *server) readProduct(r *http.Request, id string) (inventory.Product, time.Duration, error) {
	if s.ProductCache == nil {
		p, err := s.Store.Product(r.Context(), id)
		return p, 0, err
	}
	maxAge, limited := exactness(r)
	if (limited && maxAge == 0) || (r.Header.Get("Authorization") != "" && s.checkAdmin(r) == nil) {
		read, err := s.ProductCache.Exact(r.Context(), id)
		return read.Product, read.Age(), err
	}
	read, err := s.ProductCache.Get(r.Context(), id)
	if err == nil && limited && read.Age() > maxAge {
		read, err = s.ProductCache.Exact(r.Context(), id)
	}
	return read.Product, read.Age(), err
}

// exactness is how old an answer r accepts, from its Cache-Control
// (RFC 9111 §5.2.1): 0 for no-cache, N seconds for max-age=N (the
// smallest, when several are given); limited is false when it sets no
// limit, and a malformed max-age sets none.
func exactness(r *http.Request) (maxAge time.Duration, limited bool) {
	for _, v := range r.Header.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-cache":
				return 0, true
			case "max-age":
				n, err := strconv.ParseUint(strings.Trim(arg, `"`), 10, 31)
				if err != nil {
					continue
				}
				if age := time.Duration(n) * time.Second; !limited || age < maxAge {
					maxAge, limited = age, true
				}
			}
		}
	}
	return maxAge, limited
}

// ageValue is d as the Age header gives it: whole seconds (RFC 9111 §5.1).
func ageValue(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// dropProduct drops product id's cache entry after a restock committed
// round, so that the round shows at once (on every replica: the entry is
// shared). If Redis fails, the old entry ends within the cache's bound.
func (s *server) dropProduct(ctx context.Context, r *http.Request, id string, round int) {
	if s.ProductCache == nil {
		return
	}
	if err := s.ProductCache.Drop(ctx, id, round); err != nil {
		s.log.WarnContext(ctx, "restocked, but the product's cache entry could not be dropped: reads may show the old round until it expires",
			"product_id", id, "round", round, "bound", s.ProductCache.TTL(), "err", err, "request_id", requestID(r))
	}
}
