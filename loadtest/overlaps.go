package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"
)

// hold is one critical section a replica held under a strategy's lock, as
// GET /products/{id}/holds reports it.
type hold struct {
	Strategy string     `json:"strategy"`
	Fence    int64      `json:"fence"`
	Start    time.Time  `json:"start"`
	End      *time.Time `json:"end"` // nil while held
	Outcome  *string    `json:"outcome"`
	Instance string     `json:"-"`
}

// fetchHolds reads every replica's holds of product (admin token). A
// replica that was killed during the run has lost the holds of its
// previous life: those are not seen.
func fetchHolds(ctx context.Context, urls []string, adminToken, product string) ([]hold, error) {
	var all []hold
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/products/"+url.PathEscape(product)+"/holds", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("GET %s holds of %s: %w", u, product, err)
		}
		var body struct {
			Instance string `json:"instance"`
			Holds    []hold `json:"holds"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s holds of %s: %s", u, product, resp.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s holds of %s: %w", u, product, err)
		}
		for _, h := range body.Holds {
			h.Instance = body.Instance
			all = append(all, h)
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
