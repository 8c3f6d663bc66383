package faults

import (
	"context"
	"fmt"

	"inventory/internal/localstack/netproxy"
)

// CommitReplyLost is commit-reply-lost: on the replicas' links to Postgres
// (see fleet.Options.NetLinks), the reply to the next COMMIT that
// committed (or to a one-statement sale, CALL sell(…), which Postgres
// commits on its own) is dropped and its connection closed, on whichever replica
// commits first. The replica must not guess: it finds the sale in the
// ledger (2xx) or answers 503 outcome-unknown, and the buyer's retry with
// the same Idempotency-Key gets the original sale. The matrix checks that
// every answer agrees with the ledger.
type CommitReplyLost struct {
	links []*netproxy.Proxy
}

// Name implements Fault.
func (*CommitReplyLost) Name() string { return "commit-reply-lost" }

// Inject implements Fault: it returns once a reply has been lost.
func (f *CommitReplyLost) Inject(ctx context.Context, t Target) error {
	var struck []func() bool
	for _, r := range t.Fleet.Replicas {
		if r.PostgresLink == nil {
			return fmt.Errorf("%s has no link to Postgres to fault: start the fleet with NetLinks", r.Instance)
		}
		s, err := r.PostgresLink.LoseCommitReply()
		if err != nil {
			return err
		}
		f.links = append(f.links, r.PostgresLink)
		struck = append(struck, s)
	}
	return waitFor(ctx, t, "a COMMIT reply lost", func(context.Context) (bool, error) {
		for _, s := range struck {
			if s() {
				return true, nil
			}
		}
		return false, nil
	})
}

// Heal implements Fault.
func (f *CommitReplyLost) Heal(ctx context.Context) error {
	for _, l := range f.links {
		l.Heal(ctx)
	}
	f.links = nil
	return nil
}
