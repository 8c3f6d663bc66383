package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"inventory/internal/history"
	"inventory/internal/verdict"
)

// DefaultWaveWithin is how long the wave of buyers sent once a fault has
// healed has to be answered (Config.WaveWithin): far more than a wave of a
// few hundred buyers takes a fleet that sells again (well under 10 s for
// every strategy here, the slowest at about 40 sales a second), far less
// than a lock TTL or lease a broken strategy might wait out forever.
const DefaultWaveWithin = 30 * time.Second

// WaveResult is the wave of buyers sent once a run's fault had healed: the
// liveness check (verdict.Wave), as --json writes it.
type WaveResult struct {
	// Left is the units of the current round as the wave began; Restocked
	// says the run had sold out and the wave's product was restocked first
	// (Round is then the round it started).
	Left      int64 `json:"left"`
	Restocked bool  `json:"restocked"`
	Round     int64 `json:"round"`
	Buyers    int64 `json:"buyers"`
	OK        int64 `json:"ok_2xx"`
	SoldOut   int64 `json:"sold_out_409"`
	// TurnedAway is the 503s, other errors and answers cut off by the
	// bound; Unanswered the buyers still without an answer when the bound
	// ran out.
	TurnedAway    int64   `json:"turned_away"`
	Unanswered    int64   `json:"unanswered"`
	Seconds       float64 `json:"seconds"`
	WithinSeconds float64 `json:"within_seconds"`
}

// wave is what runWave leaves for the run's figures and its evidence.
type wave struct {
	res      WaveResult
	evidence verdict.Wave
	counts   answerCounts // the wave's answers alone
	round    int64        // the round the wave's restock started; 0 for none
}

// waveClients is the first client number of a wave's ops in the history,
// far above any run's workers and restocks.
const waveClients = 1 << 20

// runWave is the liveness check after a fault: it reads product id's
// state (an op of the history: a reading taken while none of the run's
// buyers is in flight), restocks it to cfg.Stock when it sold out, then
// sends left + a quarter (at least 4) fresh buyers, cfg.Concurrency at once,
// each with a key of its own and retrying as the run's did, and gives them
// cfg.WaveWithin: a buyer not answered by then is cut off. Answers go into
// t (product 0) and rec as the run's do; every answer counts as late, after
// the run's last restock.
func runWave(ctx context.Context, c *Client, tr truth, cfg Config, sc Scenario, id string, t *tally, rec *history.Recorder) (*wave, error) {
	w := &wave{}
	t0 := time.Now()
	p, err := tr.product(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read %s before the wave: %w", id, err)
	}
	rec.Add(history.Op{Client: waveClients, Product: id, Kind: history.Read, Quantity: p.Quantity, Outcome: history.Sold,
		Remaining: -1, Round: int(p.Round), Start: t0, End: time.Now()})
	left := p.Quantity
	if left <= 0 {
		r0 := time.Now()
		q, err := c.restock(ctx, id, cfg.Stock)
		if err != nil {
			return nil, fmt.Errorf("restock before the wave: %w", err)
		}
		w.evidence.RestockedAt = time.Now()
		rec.Add(history.Op{Client: waveClients + 1, Product: id, Kind: history.Restock, Quantity: cfg.Stock, Outcome: history.Sold,
			Remaining: -1, Round: int(q.Round), Start: r0, End: w.evidence.RestockedAt})
		left, w.round = cfg.Stock, q.Round
		w.res.Restocked, w.res.Round = true, q.Round
	}
	buyers := int(left + max(4, left/4))
	w.res.Left, w.res.Buyers, w.res.WithinSeconds = left, int64(buyers), cfg.WaveWithin.Seconds()
	w.evidence.Left, w.evidence.Buyers, w.evidence.Within = left, int64(buyers), cfg.WaveWithin

	waveCtx, cancel := context.WithTimeout(ctx, cfg.WaveWithin)
	defer cancel()
	var next, answered atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	w.evidence.Began = began
	for k := range min(max(cfg.Concurrency, 1), buyers) {
		wg.Go(func() {
			cnt := newCounts()
			defer func() { t.merge(cnt) }()
			for waveCtx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(buyers) {
					return
				}
				strategy := ""
				if len(sc.Sell) > 0 {
					strategy = sc.Sell[i%int64(len(sc.Sell))]
				}
				key := ""
				if cfg.Keys != "" {
					key = fmt.Sprintf("%s-w%d", cfg.Keys, i)
				}
				s0 := time.Now()
				o, retries := c.buyRetrying(waveCtx, id, strategy, key, cfg.Retries)
				// A buyer the bound cut off got no answer: it may still
				// sell, as any buyer without one may.
				cut := waveCtx.Err() != nil && o.status == 0
				rec.Add(o.op(waveClients+2+k, id, key, s0, time.Now()))
				t.retries.Add(int64(retries))
				cnt.latencies = append(cnt.latencies, time.Since(s0).Microseconds())
				t.add(o, true, 0, cnt)
				w.counts.count(o, true)
				if key != "" {
					cnt.answers = append(cnt.answers, verdict.KeyedAnswer{Key: key, Definite: o.definite(), OK: o.status/100 == 2, SaleID: o.saleID})
				}
				if cut {
					return
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	w.res.Seconds = time.Since(began).Seconds()
	w.res.OK = w.counts.ok.Load()
	w.res.SoldOut = w.counts.soldOut.Load()
	w.res.TurnedAway = w.counts.lateTurnedAway.Load() - w.res.SoldOut
	w.res.Unanswered = int64(buyers) - answered.Load()
	w.evidence.Sold, w.evidence.Unanswered = w.res.OK, w.res.Unanswered
	return w, nil
}
