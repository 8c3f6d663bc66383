package matrix

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	apiclient "inventory/internal/client"
	"inventory/internal/verdict"
	"net/http"
	"strconv"
	"strings"
)

// fetchHolds reads every replica's holds of product (admin token). A
// replica that was killed during the run has lost the holds of its
// previous life: those are not seen.
func fetchHolds(ctx context.Context, urls []string, adminToken, product string) ([]verdict.Hold, error) {
	var all []verdict.Hold
	for _, u := range urls {
		got, err := apiclient.New(u, apiclient.Options{AdminToken: adminToken, HTTPClient: http.DefaultClient}).Holds(ctx, product)
		if err != nil {
			return nil, fmt.Errorf("holds of %s on %s: %w", product, u, err)
		}
		for _, h := range got.Holds {
			held := verdict.Hold{Strategy: h.Strategy, Fence: h.Fence, Start: h.Start, Instance: got.Instance}
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

// breachCounts scrapes inventory_lock_breaches_total{strategy} from every
// replica's /metrics and returns it by replica URL.
func breachCounts(ctx context.Context, urls []string, strategy string) (map[string]int64, error) {
	out := map[string]int64{}
	want := `inventory_lock_breaches_total{strategy="` + strategy + `"}`
	for _, u := range urls {
		metrics, err := apiclient.New(u, apiclient.Options{HTTPClient: http.DefaultClient}).Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", u, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(metrics))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), want+" "); ok {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				out[u] = int64(n)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", u, err)
		}
	}
	return out, nil
}

// breachDelta is the breaches counted between two scrapes. A replica whose
// counter went down was restarted: all it counted since is new.
func breachDelta(before, after map[string]int64) int64 {
	var n int64
	for u, a := range after {
		if b := before[u]; a >= b {
			n += a - b
		} else {
			n += a
		}
	}
	return n
}
