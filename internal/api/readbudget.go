package api

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// errTooManyReads: the replica's budget of anonymous reads
// (Config.ReadRate) had no turn for this one within readWait.
var errTooManyReads = errors.New("too many reads: this replica's read budget had no turn within a second")

// readWait is the longest a read waits for its turn in the read budget.
const readWait = time.Second

// readBudget paces the anonymous reads to Config.ReadRate: a read waits
// for its turn (a waiting reader costs no CPU), at most readWait, and is
// refused 429 past it. Sales and admin calls never wait on it, nor does a
// read with the admin token (an operator's, a load tester's verdict).
func (s *server) readBudget(next http.Handler) http.Handler {
	if s.reads == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" && s.checkAdmin(r) == nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readWait)
		err := s.reads.Wait(ctx)
		cancel()
		if err != nil {
			s.writeProblem(w, r, errTooManyReads)
			return
		}
		next.ServeHTTP(w, r)
	})
}
