package stock

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/lock"
)

func TestDBErrSaysWhatIsWorthRetrying(t *testing.T) {
	tests := []struct {
		code        string
		unavailable bool // a definite failure that trying again may cure
		lockTimeout bool
	}{
		{"40001", true, false},  // serialization failure: rolled back
		{"40P01", true, false},  // deadlock detected: rolled back
		{"57P01", true, false},  // admin shutdown
		{"08006", true, false},  // connection failure
		{"53300", true, false},  // too many connections
		{"55P03", false, true},  // lock_not_available
		{"23505", false, false}, // unique violation: a bug or a conflict, not the weather
		{"22003", false, false}, // numeric value out of range
	}
	for _, tt := range tests {
		err := dbErr("op", &pgconn.PgError{Code: tt.code})
		if got := errors.Is(err, ErrUnavailable); got != tt.unavailable {
			t.Errorf("dbErr(op, SQLSTATE %s) wraps ErrUnavailable = %v, want %v (%v)", tt.code, got, tt.unavailable, err)
		}
		if got := errors.Is(err, ErrLockTimeout); got != tt.lockTimeout {
			t.Errorf("dbErr(op, SQLSTATE %s) wraps ErrLockTimeout = %v, want %v (%v)", tt.code, got, tt.lockTimeout, err)
		}
	}
}

// TestLockErrByKindNotByBackend: an error from taking a lock is answered
// by its kind alone, whichever backend it comes from (one no strategy
// names included): a timeout, a loss, the backend's servers failing or
// its locker closed; the answer still names the backend.
func TestLockErrByKindNotByBackend(t *testing.T) {
	for _, backend := range []string{"redislock", "pglock", "etcdlock", "zklock", "redlock", "anotherlock"} {
		for _, tt := range []struct {
			kind, want error
		}{
			{lock.ErrTimeout, ErrLockTimeout},
			{lock.ErrLost, ErrLockLost},
			{lock.ErrUnavailable, ErrUnavailable},
			{lock.ErrClosed, ErrUnavailable},
		} {
			in := &lock.Error{Backend: backend, Op: "lock", Key: "lock:{sku-1}", Err: fmt.Errorf("%w: test", tt.kind)}
			err := lockErr(in)
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), backend+": lock") {
				t.Errorf("lockErr(%v) = %v, want it to wrap %v and name %s", in, err, tt.want, backend)
			}
		}
	}
}
