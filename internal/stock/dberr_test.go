package stock

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// TestLockErrByKindNotByBackend: an error from taking a lock is answered
// by its kind alone, whichever backend it comes from (one no strategy
// names included): a timeout, a loss, the backend's servers failing or
// its locker closed; the answer still names the backend.
func TestLockErrByKindNotByBackend(t *testing.T) {
	for _, backend := range []string{"redislock", "pglock", "etcdlock", "zklock", "redlock", "anotherlock"} {
		for _, tt := range []struct {
			kind, want error
		}{
			{lock.ErrTimeout, inventory.ErrLockTimeout},
			{lock.ErrLost, inventory.ErrLockLost},
			{lock.ErrUnavailable, inventory.ErrUnavailable},
			{lock.ErrClosed, inventory.ErrUnavailable},
		} {
			in := &lock.Error{Backend: backend, Op: "lock", Key: "lock:{sku-1}", Err: fmt.Errorf("%w: test", tt.kind)}
			err := lockErr(in)
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), backend+": lock") {
				t.Errorf("lockErr(%v) = %v, want it to wrap %v and name %s", in, err, tt.want, backend)
			}
		}
	}
}
