package lock

import "context"

type ownerKey struct{}

// WithOwner returns a context that carries owner as the owner of the locks
// taken under it (or under any context derived from it): a re-entrant
// Locker re-enters a lock its owner already holds instead of waiting for
// it; other Lockers ignore the owner. Owners must be non-empty and must not
// start with a NUL byte (a backend may keep fields of its own beside the
// owners'); OwnerFrom ignores such.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the lock owner carried by ctx.
func OwnerFrom(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	if !ok || o == "" || o[0] == 0 {
		return "", false
	}
	return o, true
}
