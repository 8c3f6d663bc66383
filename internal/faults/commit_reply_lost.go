package faults

import (
	"context"

	"inventory/internal/fleet"
)

// CommitReplyLost is commit-reply-lost: on the first replica's link to
// Postgres (see fleet.Options.NetLinks), the reply to the next COMMIT that
// committed is dropped and its connection closed. The replica must not
// guess: it finds the sale in the ledger (2xx) or answers 503
// outcome-unknown, and the buyer's retry with the same Idempotency-Key
// gets the original sale. The matrix checks that every answer agrees with
// the ledger.
type CommitReplyLost struct {
	faulted *fleet.Replica
}

// Name implements Fault.
func (*CommitReplyLost) Name() string { return "commit-reply-lost" }

// Inject implements Fault: it returns once a reply has been lost.
func (f *CommitReplyLost) Inject(ctx context.Context, t Target) error {
	r, err := linkedReplica(t)
	if err != nil {
		return err
	}
	struck, err := r.PostgresLink.LoseCommitReply()
	if err != nil {
		return err
	}
	f.faulted = r
	return waitFor(ctx, t, "a COMMIT reply lost", func(context.Context) (bool, error) { return struck(), nil })
}

// Heal implements Fault.
func (f *CommitReplyLost) Heal(ctx context.Context) error {
	if f.faulted == nil {
		return nil
	}
	r := f.faulted
	f.faulted = nil
	r.PostgresLink.Heal(ctx)
	return nil
}
