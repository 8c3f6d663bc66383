package load

import (
	"errors"
	"net/http"
	"testing"
	"time"

	apiclient "inventory/internal/client"
	"inventory/internal/history"
)

// TestAnswersAsHistoryOps: every answer a buyer can get becomes the op the
// history checker reads.
func TestAnswersAsHistoryOps(t *testing.T) {
	problem := func(status int, slug string) error {
		return &apiclient.Problem{Status: status, Type: apiclient.TypePrefix + slug}
	}
	tests := []struct {
		name          string
		sale          apiclient.Sale
		err           error
		maybe         bool // an earlier attempt may have sold
		want          history.Outcome
		wantRemaining int64
		wantRound     int
	}{
		{"2xx", apiclient.Sale{Remaining: 7, Round: 3}, nil, false, history.Sold, 7, 3},
		{"2xx replayed", apiclient.Sale{Remaining: 7, Round: 3, Replayed: true}, nil, false, history.Sold, -1, 3},
		{"2xx that does not parse", apiclient.Sale{}, apiclient.ErrMalformedAnswer, false, history.Sold, -1, 0},
		{"409 sold out", apiclient.Sale{}, problem(409, "sold-out"), false, history.SoldOut, -1, 0},
		{"503 outcome-unknown", apiclient.Sale{}, problem(503, "outcome-unknown"), false, history.Unknown, -1, 0},
		{"503 lock-timeout", apiclient.Sale{}, problem(503, "lock-timeout"), false, history.Failed, -1, 0},
		{"503 lock-timeout after an outcome-unknown", apiclient.Sale{}, problem(503, "lock-timeout"), true, history.Unknown, -1, 0},
		{"429", apiclient.Sale{}, problem(429, "too-many-requests"), false, history.Failed, -1, 0},
		{"400", apiclient.Sale{}, problem(400, "bad-quantity"), false, history.Failed, -1, 0},
		{"500", apiclient.Sale{}, problem(500, "internal"), false, history.Unknown, -1, 0},
		{"502", apiclient.Sale{}, problem(http.StatusBadGateway, "bad-gateway"), false, history.Unknown, -1, 0},
		{"504", apiclient.Sale{}, problem(http.StatusGatewayTimeout, "gateway-timeout"), false, history.Unknown, -1, 0},
		{"no answer", apiclient.Sale{}, errors.New("connection reset"), false, history.Unknown, -1, 0},
	}
	start, end := time.Unix(1, 0), time.Unix(2, 0)
	for _, tt := range tests {
		o := outcomeOf(tt.sale, tt.err)
		o.maybe = tt.maybe
		op := o.op(4, "sku-1", start, end)
		want := history.Op{Client: 4, Product: "sku-1", Kind: history.Sale, Quantity: 1, Outcome: tt.want,
			Remaining: tt.wantRemaining, Round: tt.wantRound, Start: start, End: end}
		if op != want {
			t.Errorf("%s: outcomeOf(%+v, %v).op = %+v, want %+v", tt.name, tt.sale, tt.err, op, want)
		}
	}
}
