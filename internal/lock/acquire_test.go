package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestAcquireClassifiesWhatABackendLeftUnclassified: an attempt's error
// that is one of the kinds comes back as it was; any other (a refused
// connection, a server's error reply) comes back wrapping ErrUnavailable,
// still naming the backend, so that a caller of any backend needs to tell
// only the kinds apart.
func TestAcquireClassifiesWhatABackendLeftUnclassified(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connection refused")
	tests := []struct {
		name string
		err  error
		want []error // every one must match
	}{
		{"a server failure", &Error{Backend: "somelock", Op: "lock", Key: "k", Err: refused}, []error{ErrUnavailable, refused}},
		{"a bare error", refused, []error{ErrUnavailable, refused}},
		{"a timeout", &Error{Backend: "somelock", Op: "lock", Key: "k", Err: fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)}, []error{ErrTimeout, context.DeadlineExceeded}},
		{"a loss", &Error{Backend: "somelock", Op: "lock", Key: "k", Err: fmt.Errorf("%w: %w", ErrLost, ErrExpired)}, []error{ErrLost}},
		{"held", &Error{Backend: "somelock", Op: "trylock", Key: "k", Err: ErrNotAcquired}, []error{ErrNotAcquired}},
		{"closed", &Error{Backend: "somelock", Op: "lock", Key: "k", Err: ErrClosed}, []error{ErrClosed}},
	}
	for _, tt := range tests {
		_, err := Acquire(context.Background(), nil, "k", "lock", true,
			func(context.Context, string, string, bool, *int) (Lease, error) { return nil, tt.err })
		for _, w := range tt.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: Acquire = %v, want it to wrap %v", tt.name, err, w)
			}
		}
		if !slices.Contains(tt.want, ErrUnavailable) && errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Acquire = %v, want it not to wrap ErrUnavailable (it is of another kind)", tt.name, err)
		}
		var e *Error
		if errors.As(tt.err, &e) && (!errors.As(err, &e) || e.Backend != "somelock" || !strings.HasPrefix(err.Error(), "somelock: ")) {
			t.Errorf("%s: Acquire = %v, want a *lock.Error still naming backend somelock", tt.name, err)
		}
	}
}
