package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// maxRequestID bounds an X-Request-ID the service accepts from a caller.
const maxRequestID = 64

// requestIDKey is the context key under which withRequestID stores the id.
type requestIDKey struct{}

// validRequestID reports whether id may be used as the caller gave it: 1–64
// characters of A–Z, a–z, 0–9, '.', '_' and '-' (nginx applies the same
// rule). The id goes into every log line and problem body, so it must never
// need escaping.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns a random id shaped like nginx's $request_id (32 hex
// digits), so an id looks the same whichever side made it.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b)
}

// withRequestID gives every request an id: the caller's X-Request-ID when it
// sent exactly one and it passes validRequestID, else a new one. The id is
// stored in the request's context, where requestID finds it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		if given := r.Header.Values("X-Request-ID"); len(given) == 1 && validRequestID(given[0]) {
			id = given[0]
		} else {
			id = newRequestID()
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}
