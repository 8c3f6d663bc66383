package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	apiclient "inventory/internal/client"
)

// hold is one critical section a replica held under a strategy's lock, as
// GET /products/{id}/holds reports it, with the replica.
type hold struct {
	Strategy string
	Fence    int64
	Start    time.Time
	End      *time.Time // nil while held
	Outcome  *string
	Instance string
}

// fetchHolds reads every replica's holds of product (admin token). A
// replica that was killed during the run has lost the holds of its
// previous life: those are not seen.
func fetchHolds(ctx context.Context, urls []string, adminToken, product string) ([]hold, error) {
	var all []hold
	for _, u := range urls {
		got, err := apiclient.New(u, apiclient.Options{AdminToken: adminToken, HTTPClient: http.DefaultClient}).Holds(ctx, product)
		if err != nil {
			return nil, fmt.Errorf("holds of %s on %s: %w", product, u, err)
		}
		for _, h := range got.Holds {
			held := hold{Strategy: h.Strategy, Fence: h.Fence, Start: h.Start, Instance: got.Instance}
			if !h.End.IsZero() {
				held.End = &h.End
			}
			if h.Outcome != "" {
				held.Outcome = &h.Outcome
			}
			all = append(all, held)
		}
	}
	return all, nil
}

// overlap is two holds of one product that were held at the same time:
// two holders each believing the lock theirs.
type overlap struct {
	A, B hold
}

// overlaps finds every pair of holds whose intervals intersect; a hold
// still open counts as held until now. Holds are compared across replicas
// by the wall clock they share (one machine).
func overlaps(holds []hold, now time.Time) []overlap {
	hs := append([]hold(nil), holds...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Start.Before(hs[j].Start) })
	end := func(h hold) time.Time {
		if h.End == nil {
			return now
		}
		return *h.End
	}
	var out []overlap
	for i := range hs {
		for j := i + 1; j < len(hs) && hs[j].Start.Before(end(hs[i])); j++ {
			out = append(out, overlap{A: hs[i], B: hs[j]})
		}
	}
	return out
}

// describe is an overlap in one line, for a run's reasons.
func (o overlap) describe() string {
	return fmt.Sprintf("%s on %s (fence %d) and %s on %s (fence %d) held at once",
		o.A.Strategy, o.A.Instance, o.A.Fence, o.B.Strategy, o.B.Instance, o.B.Fence)
}
