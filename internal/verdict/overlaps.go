package verdict

import (
	"fmt"
	"sort"
	"time"
)

// Hold is one critical section a replica held under a strategy's lock, as
// GET /products/{id}/holds reports it, with the replica.
type Hold struct {
	Strategy string
	Fence    int64
	Start    time.Time
	End      *time.Time // nil while held
	Outcome  *string
	Instance string
}

// Overlap is two holds of one product that were held at the same time:
// two holders each believing the lock theirs.
type Overlap struct {
	A, B Hold
}

// Overlaps finds every pair of holds whose intervals intersect; a hold
// still open counts as held until now. Holds are compared across replicas
// by the wall clock they share (one machine).
func Overlaps(holds []Hold, now time.Time) []Overlap {
	hs := append([]Hold(nil), holds...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Start.Before(hs[j].Start) })
	end := func(h Hold) time.Time {
		if h.End == nil {
			return now
		}
		return *h.End
	}
	var out []Overlap
	for i := range hs {
		for j := i + 1; j < len(hs) && hs[j].Start.Before(end(hs[i])); j++ {
			out = append(out, Overlap{A: hs[i], B: hs[j]})
		}
	}
	return out
}

// Describe is the overlap in one line, for a run's reasons.
func (o Overlap) Describe() string {
	return fmt.Sprintf("%s on %s (fence %d) and %s on %s (fence %d) held at once",
		o.A.Strategy, o.A.Instance, o.A.Fence, o.B.Strategy, o.B.Instance, o.B.Fence)
}
