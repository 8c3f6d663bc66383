package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"

	apiclient "inventory/internal/client"
	"inventory/internal/history"
	"inventory/internal/verdict"
)

// DefaultWorkDelay is INVENTORY_WORK_DELAY for a local fleet's replicas:
// long enough that the unsafe strategies oversell reproducibly on a 2-core
// machine (measured: see the README), short enough that the whole demo
// takes well under a minute.
const DefaultWorkDelay = 2 * time.Millisecond

// Config is what every run shares.
type Config struct {
	Product     string
	Stock       int64
	Buyers      int
	Concurrency int
	// RestockDuring restocks the product (same stock) once a third of the
	// buyers have been answered, so the run spans two rounds: the last
	// third of the buyers start only once the restock has returned, so
	// round 2 is sold in however fast round 1 went (the middle third is in
	// flight around the restock).
	RestockDuring bool
	// Keys, when not empty, makes buyer i send the Idempotency-Key
	// "<Keys>-<i>" and retry an answer that is not final (a 5xx, 408, 429
	// or none: apiclient.Retryable) with the same key, up to Retries
	// times; the answer counted is the last one.
	Keys    string
	Retries int
	// Strike, when set, runs alongside the buyers: it strikes with a fault
	// at its moment and heals it. answered reports how many buyers have
	// their answer, and selling is closed once all have. The run waits for
	// it before reading the final state, and its error ends the run. A
	// faulted run may span rounds, and is judged as faulted (see
	// verdict.Figures.Faulted).
	Strike func(ctx context.Context, answered func() int64, selling <-chan struct{}) error
	// Spread, when set, paces the buyers: they start over at least Spread,
	// in waves of Concurrency at once (see waves); a run whose sales are
	// slower is not held back.
	Spread time.Duration
	// Products, above 1, sells "<Product>-1" … "<Product>-N" at once, Stock
	// units each, Buyers in all, each buyer picking its product by
	// zipfChoices(Products, Buyers, Zipf, Seed); every product is checked on
	// its own. 0 or 1: Product alone. Not with Keys.
	Products int
	Zipf     float64 // the Zipf exponent, above 1 (0: DefaultZipf)
	Seed     uint64  // seeds the buyers' product choices
	// PostgresURL is the fleet's Postgres: when set, every product's state
	// before and after the buyers (stock, rounds, ledger) is read from it,
	// not from the service's API, and so are restocks made by others
	// during the run (a fault's).
	PostgresURL string
	// HistoryTimeout bounds the history check of each window of each
	// product's history (0: DefaultHistoryBudget, which grows with the
	// window's ops); past it the product is INCONCLUSIVE, and a safe row
	// with an INCONCLUSIVE history fails.
	HistoryTimeout time.Duration
	// WaveWithin, with Strike, is the liveness check: once the fault has
	// healed (Strike returned), a fresh wave of buyers buys what is left
	// of the product (restocked first when the run sold out) and must be
	// answered within it (see runWave); its answers join the run's figures
	// and history. 0: no wave. One product only.
	WaveWithin time.Duration
	// Readers, when above 0, keeps that many anonymous readers asking
	// GET /live?since=0 and GET /products/{id} while the buyers buy (see
	// readers): whether reads can starve sales.
	Readers int
	// Orders, when set, makes a fraction of the buyers hold units for an
	// order and take it through its steps (see OrderScenario); the run
	// then waits for every held order to end, and reads every invariant of
	// an order's life from Postgres (needs PostgresURL). Not with Keys or
	// RestockDuring.
	Orders *OrderScenario
}

// Scenario is one row of the table: who sells and how buyers pick the strategy.
type Scenario struct {
	Name string // the row's name: a strategy, "mix" or "switch"
	Safe bool   // every strategy it sells with claims to be safe
	// Sell is the strategies buyers name with ?strategy=, buyer i taking
	// Sell[i mod len]. Empty: buyers name none and get the fleet default.
	Sell []string
	// Switch, with Sell empty, is the defaults the run cycles the fleet
	// through (PUT /strategy), starting with Switch[0] and moving on every
	// SwitchEvery answered buyers; the default found before is restored
	// afterwards.
	Switch      []string
	SwitchEvery int
}

// Row names of the scenarios that are not one strategy.
const (
	RowMix    = "mix"
	RowSwitch = "switch"
)

// Single is the row of one strategy, its buyers naming it.
func Single(s StrategyInfo) Scenario {
	return Scenario{Name: s.Name, Safe: s.Safe, Sell: []string{s.Name}}
}

// Result is one run of one row, as printed in the table and written by --json.
// With several rounds (--restock-during), Initial, LedgerUnits and
// LedgerRows are sums over the run's rounds, Oversold is summed round by
// round, and FinalStock and LostUpdates are the current round's.
type Result struct {
	Run         int    `json:"run"`
	Strategy    string `json:"strategy"` // a strategy, or the row "mix" or "switch"
	Round       int64  `json:"round"`    // the product's current round after the run (0 with --products: see Products)
	Safe        bool   `json:"safe"`
	Initial     int64  `json:"initial"`
	Buyers      int64  `json:"buyers"`
	OK          int64  `json:"ok_2xx"`
	SoldOut     int64  `json:"sold_out_409"`
	Unavailable int64  `json:"unavailable_503"` // every 503, outcome-unknown included
	Errors      int64  `json:"errors"`
	Breaches    int64  `json:"breaches"` // 409/503 answers flagged lock_breach: the lock broke, the database refused the write
	// BreachMetric is the rise of the replicas' inventory_lock_breaches_total
	// for the strategy during a faulted run (a killed replica's count is lost).
	BreachMetric int64 `json:"breach_metric,omitempty"`
	Unknown      int64 `json:"unknown"` // 503 outcome-unknown answers: sold or not, the ledger says
	// CircuitRefused is the 503 circuit-open answers: the invariant
	// watchdog had stopped the product's sales (seen in every mode, the
	// database known or not).
	CircuitRefused int64                 `json:"circuit_open_503,omitempty"`
	FinalStock     int64                 `json:"final_stock"`
	LedgerUnits    int64                 `json:"ledger_units"`
	LedgerRows     int64                 `json:"ledger_rows"`
	Oversold       int64                 `json:"oversold"`
	LostUpdates    int64                 `json:"lost_updates"`
	Undersold      int64                 `json:"undersold"`
	Retries        int64                 `json:"retries,omitempty"`       // requests re-sent with the same Idempotency-Key after an answer that was not final (apiclient.Retryable)
	Rounds         []verdict.RoundResult `json:"rounds"`                  // every round the run sold in, each checked on its own
	BrokenRounds   []int64               `json:"broken_rounds,omitempty"` // rounds that broke an invariant
	Switches       int                   `json:"switches,omitempty"`      // fleet default switches during the run
	PerStrategy    map[string]int64      `json:"per_strategy,omitempty"`  // 2xx answers by the strategy that sold (mix and switch rows)
	Seconds        float64               `json:"seconds"`
	Throughput     float64               `json:"throughput_rps"`
	// HotRowRate is, with --ceilings and the fleet's Postgres known, the
	// hot-row ceiling (see Ceilings.HotRow) measured just before this run:
	// what its sales per second are a multiple of.
	HotRowRate float64 `json:"hot_row_tps,omitempty"`
	// SerialRate is, with --ceilings, the strategy's serial ceiling
	// measured just before this run (see SerialRate): what its sales per
	// second are compared against.
	SerialRate float64 `json:"serial_sales_per_s,omitempty"`
	// SoldOutRate is 409s per second once the product was sold out, with
	// --ceilings (one-strategy rows that sold out).
	SoldOutRate float64 `json:"sold_out_per_s,omitempty"`
	// SoldOutHealthz is GET /healthz answers per second measured in
	// slices alternating with SoldOutRate's, what it is compared against.
	SoldOutHealthz float64          `json:"sold_out_healthz_per_s,omitempty"`
	LatencyMs      Latency          `json:"latency_ms"`
	PerReplica     map[string]int64 `json:"per_replica"`
	Verdict        string           `json:"verdict"`
	Reasons        []string         `json:"reasons,omitempty"`
	FirstErrors    []string         `json:"first_errors,omitempty"`

	// Timeline is the 2xx answers in each 100 ms (Tick) since the buyers
	// started: sales over time, for the HTML report.
	Timeline []int64 `json:"sales_per_100ms,omitempty"`

	// Products is every product of a many-product run (--products), each
	// checked on its own, in order (product 1, the most likely pick,
	// first); the figures above are then their sums, and Round, Rounds and
	// BrokenRounds are left empty (each product has its own). Seed is what
	// the buyers' product choices were seeded with.
	Products []ProductResult `json:"products,omitempty"`
	Seed     uint64          `json:"seed,omitempty"`

	// StateFrom says where the product's state before and after the run
	// was read: FromPostgres, or FromAPI when the load tester was not
	// given the fleet's database.
	StateFrom string `json:"state_from"`
	// History is the check of every answer against a sequential model of
	// each product (see History).
	History *History `json:"history,omitempty"`
	// Reads is what the anonymous readers got (Config.Readers).
	Reads *Reads `json:"reads,omitempty"`
	// Circuit is the circuit the invariant watchdog opened on the product's
	// round during the run (an unsafe strategy oversold), read from the
	// fleet's Postgres once it opened; nil when none opened or the database
	// is not known. Circuits is every circuit open on the run's products
	// in its rounds right after it, as the verdict saw them.
	Circuit  *Circuit          `json:"circuit,omitempty"`
	Circuits []verdict.Circuit `json:"circuits,omitempty"`
	// Wave is, under a fault, the buyers sent once it had healed (see
	// Config.WaveWithin); their answers are counted in the figures above.
	Wave *WaveResult `json:"wave,omitempty"`
	// Orders is, with Config.Orders, what the run's orders came to.
	Orders *OrdersResult `json:"orders,omitempty"`

	// Answers is, with Config.Keys, every buyer's last answer; --json leaves
	// it out.
	Answers []verdict.KeyedAnswer `json:"-"`
	// Evidence is what the verdict was judged from (see Judge).
	Evidence verdict.Evidence `json:"-"`
}

// Latency holds request latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// answerCounts is what the buyers of one product (or of every product)
// saw; workers add to it concurrently.
type answerCounts struct {
	ok, soldOut, unavailable, errors, breaches, unknown, circuitOpen atomic.Int64
	// Of buyers who asked after the product's last restock in the run.
	lateSoldOut, lateTurnedAway atomic.Int64
	// lowest is 1 + the lowest remaining a 2xx told (0: none told one).
	lowest atomic.Int64
}

// noteRemaining keeps the lowest remaining a 2xx answer told, replays
// aside (theirs is what is left now).
func (a *answerCounts) noteRemaining(o outcome) {
	if o.status/100 != 2 || !o.remainingKnown || o.replayed {
		return
	}
	for {
		old := a.lowest.Load()
		if old != 0 && old <= o.remaining+1 {
			return
		}
		if a.lowest.CompareAndSwap(old, o.remaining+1) {
			return
		}
	}
}

// count adds o; late says the buyer asked after the product's last restock.
func (a *answerCounts) count(o outcome, late bool) {
	switch {
	case o.err != nil:
		a.errors.Add(1)
	case o.status/100 == 2:
		a.ok.Add(1)
	case o.status == 409:
		a.soldOut.Add(1)
		if late {
			a.lateSoldOut.Add(1)
		}
	case o.status == 503:
		a.unavailable.Add(1)
	}
	if late && o.status/100 != 2 {
		a.lateTurnedAway.Add(1)
	}
	if o.breach {
		a.breaches.Add(1)
	}
	if o.unknown {
		a.unknown.Add(1)
	}
	if o.circuitOpen {
		a.circuitOpen.Add(1)
	}
	a.noteRemaining(o)
}

// figures is the answers as verdict.Judge takes them, the product's state to be
// filled in.
func (a *answerCounts) figures(buyers int64) verdict.Figures {
	return verdict.Figures{
		Buyers:         buyers,
		OK:             a.ok.Load(),
		SoldOut:        a.soldOut.Load(),
		Unavailable:    a.unavailable.Load(),
		Errors:         a.errors.Load(),
		Unknown:        a.unknown.Load(),
		Breaches:       a.breaches.Load(),
		LateSoldOut:    a.lateSoldOut.Load(),
		LateTurnedAway: a.lateTurnedAway.Load(),
		LowestRemaining: func() *int64 {
			if l := a.lowest.Load(); l != 0 {
				l--
				return &l
			}
			return nil
		}(),
	}
}

// tally is what the buyers of one run saw; workers add to it concurrently.
type tally struct {
	all      answerCounts
	products []answerCounts // by product index
	retries  atomic.Int64

	mu          sync.Mutex
	perReplica  map[string]int64
	perRound    map[productRound]int64 // 2xx by product and the round the response named
	perStrategy map[string]int64
	perTick     map[int64]int64 // 2xx by 100 ms since the buyers started
	firstErrs   []string
	answers     []verdict.KeyedAnswer
	hist        *hdrhistogram.Histogram // microseconds
}

// productRound is a product (by index) and one of its rounds.
type productRound struct {
	product int
	round   int64
}

func newTally(products int) *tally {
	return &tally{products: make([]answerCounts, products), perReplica: map[string]int64{}, perRound: map[productRound]int64{},
		perStrategy: map[string]int64{}, perTick: map[int64]int64{}, hist: newHistogram()}
}

// counts is one worker's share of the tally's maps, merged at the end.
type counts struct {
	perReplica  map[string]int64
	perRound    map[productRound]int64
	perStrategy map[string]int64
	perTick     map[int64]int64 // 2xx answers by 100 ms since the buyers started
	answers     []verdict.KeyedAnswer
	// latencies are the buyers' in microseconds, recorded into the tally's
	// histogram at the merge (merging a histogram per worker walked all of
	// its buckets: 5% of the fault matrix's CPU).
	latencies []int64
}

func newCounts() counts {
	return counts{perReplica: map[string]int64{}, perRound: map[productRound]int64{}, perStrategy: map[string]int64{}, perTick: map[int64]int64{}}
}

// add counts o, an answer about product p; late says the buyer asked after
// the product's last restock in the run.
func (t *tally) add(o outcome, late bool, p int, c counts) {
	t.all.count(o, late)
	t.products[p].count(o, late)
	switch {
	case o.err != nil:
		t.mu.Lock()
		if len(t.firstErrs) < 5 {
			t.firstErrs = append(t.firstErrs, o.err.Error())
		}
		t.mu.Unlock()
	case o.status/100 == 2:
		c.perRound[productRound{p, o.round}]++
		if o.strategy != "" {
			c.perStrategy[o.strategy]++
		}
	}
	if o.status != 0 {
		name := o.instance
		if name == "" {
			name = "(no X-Instance)"
		}
		c.perReplica[name]++
	}
}

// okByRound is each product's 2xx answers by the round they named, by
// product index.
func (t *tally) okByRound() []map[int64]int64 {
	out := make([]map[int64]int64, len(t.products))
	for i := range out {
		out[i] = map[int64]int64{}
	}
	for k, n := range t.perRound {
		out[k.product][k.round] += n
	}
	return out
}

func (t *tally) merge(c counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range c.latencies {
		// Above the 60 s ceiling is recorded as the ceiling.
		_ = t.hist.RecordValue(min(v, t.hist.HighestTrackableValue()))
	}
	for k, v := range c.perReplica {
		t.perReplica[k] += v
	}
	for k, v := range c.perRound {
		t.perRound[k] += v
	}
	for k, v := range c.perStrategy {
		t.perStrategy[k] += v
	}
	for k, v := range c.perTick {
		t.perTick[k] += v
	}
	t.answers = append(t.answers, c.answers...)
}

// Run restocks the product (every product, with cfg.Products
// above 1), fires cfg.Buyers buyers for one unit each through
// cfg.Concurrency workers (restocking once more, or switching the fleet
// default, while they buy, as cfg and sc say), and reads every round the
// run sold in back from the server, product by product. progress, when not
// nil, is called once per finished buyer.
func Run(ctx context.Context, c *Client, cfg Config, sc Scenario, progress func()) (_ Result, err error) {
	ids := productIDs(cfg)
	if cfg.Keys != "" && len(ids) > 1 {
		return Result{}, errors.New("idempotency keys are checked against one product: Keys needs Products of at most 1")
	}
	var choices []int32 // buyer i buys ids[choices[i]]; nil: ids[0]
	if len(ids) > 1 {
		choices = zipfChoices(len(ids), cfg.Buyers, cmp.Or(cfg.Zipf, DefaultZipf), cfg.Seed)
	}
	if cfg.Orders != nil && cfg.RestockDuring {
		return Result{}, fmt.Errorf("%w: an order scenario is checked in one round: not with RestockDuring", ErrUsage)
	}
	// A hold's key is the run's (Keys, then every ledger row is a buyer's
	// and CheckKeys holds them all) or, without one, its own under a prefix
	// new to this run (a key of an earlier run would replay that run's
	// hold); either way it is sent again as often as a sale with a key.
	holdKeys, holdRetries := cfg.Keys, cfg.Retries
	if holdKeys == "" {
		holdKeys = "hold-" + uuid.NewString()
	}
	if holdRetries <= 0 {
		holdRetries = HoldRetries
	}
	parallel := adminParallel(cfg.Concurrency)
	tr, err := openTruth(ctx, c, cfg.PostgresURL, parallel)
	if err != nil {
		return Result{}, err
	}
	defer tr.close()
	var ord *orders
	if cfg.Orders != nil {
		if ord, err = newOrders(*cfg.Orders, c, tr, ids); err != nil {
			return Result{}, err
		}
		// However the run ends, no follower outlives it (one ends at its
		// step, at most pay_within after its hold, or when ctx ends).
		defer ord.followers.Wait()
	}
	before := make([]product, len(ids))
	if err := forEachProduct(ctx, ids, parallel, func(ctx context.Context, i int, id string) error {
		p, err := restockChecked(ctx, c, tr, id, cfg.Stock)
		before[i] = p
		return err
	}); err != nil {
		return Result{}, err
	}
	switches := 0
	if len(sc.Sell) == 0 {
		restore, err := c.DefaultStrategy(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("read the fleet default: %w", err)
		}
		defer func() {
			// Put the default back even after an interrupt.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			rerr := c.SetDefaultStrategy(rctx, restore)
			if rerr == nil {
				rerr = c.awaitDefault(rctx, restore, 8, 10*time.Second)
			}
			if rerr != nil && err == nil {
				err = fmt.Errorf("restore the fleet default: %w", rerr)
			}
		}()
		if len(sc.Switch) > 0 {
			if err := c.SetDefaultStrategy(ctx, sc.Switch[0]); err != nil {
				return Result{}, err
			}
			// Replicas cache the default briefly; the first buyers must not
			// get the old one, which may be unsafe.
			if err := c.awaitDefault(ctx, sc.Switch[0], 8, 10*time.Second); err != nil {
				return Result{}, err
			}
		}
	}

	// A failed restock or switch stops the run: its figures would not mean what the row says.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var (
		// The round each product's mid-run restock started; 0 until it returned.
		restockedRound = make([]atomic.Int64, len(ids))
		switchMu       sync.Mutex
		lastSwitch     int64
	)
	restockAt := int64(max(1, cfg.Buyers/3))
	// Buyers from afterRestock on wait for the restock: on a fast fleet the
	// rest could all be answered before it lands, and round 2 would go
	// unchecked. afterRestock >= restockAt, so the restock always comes.
	afterRestock := max(restockAt, int64(2*cfg.Buyers/3))
	restocked := make(chan struct{})
	// Every buyer's sale is one op of the history, its client the worker
	// that sent it (a worker's sales never overlap); restocks are the
	// clients after the workers, one per product.
	var rec history.Recorder
	workers := min(cfg.Concurrency, cfg.Buyers)
	afterAnswer := func(n int64) {
		if cfg.RestockDuring && n == restockAt {
			err := forEachProduct(runCtx, ids, parallel, func(ctx context.Context, i int, id string) error {
				t0 := time.Now()
				p, err := c.restock(ctx, id, cfg.Stock)
				if err != nil {
					return err
				}
				rec.Add(history.Op{Client: workers + i, Product: id, Kind: history.Restock, Quantity: cfg.Stock,
					Outcome: history.Sold, Remaining: -1, Round: int(p.Round), Start: t0, End: time.Now()})
				restockedRound[i].Store(p.Round)
				return nil
			})
			if err != nil {
				stop(fmt.Errorf("mid-run restock: %w", err))
			}
			close(restocked) // after stop: a failed restock lets no waiting buyer buy
			if err != nil {
				return
			}
		}
		if len(sc.Switch) > 0 && sc.SwitchEvery > 0 && n%int64(sc.SwitchEvery) == 0 && n < int64(cfg.Buyers) {
			switchMu.Lock()
			defer switchMu.Unlock()
			if n <= lastSwitch { // a later switch got here first
				return
			}
			lastSwitch = n
			if err := c.SetDefaultStrategy(runCtx, sc.Switch[(n/int64(sc.SwitchEvery))%int64(len(sc.Switch))]); err != nil {
				stop(err)
				return
			}
			switches++
		}
	}

	t := newTally(len(ids))
	var next, answered atomic.Int64
	var wg sync.WaitGroup
	selling := make(chan struct{})
	struck := make(chan error, 1) // Strike's error, once it returned
	faultFrom := time.Now()       // restocks by others are looked for from here to faultUntil
	var healed time.Time          // when Strike returned: the fault had struck and healed
	if cfg.Strike != nil {
		go func() {
			err := cfg.Strike(ctx, answered.Load, selling)
			healed = time.Now() // read after the send below
			struck <- err
		}()
	}
	var pace <-chan struct{}
	if cfg.Spread > 0 {
		pace = waves(runCtx, cfg.Spread, cfg.Buyers, cfg.Concurrency)
	}
	reading := c.startReaders(ctx, cfg.Readers, ids[0])
	firsts := make([]int64, len(ids))
	for i := range ids {
		firsts[i] = before[i].Round
	}
	var stopWatching func() error
	if ord != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		wait := ord.watchReturns(watchCtx, firsts)
		stopWatching = func() error { stopWatch(); return wait() }
		defer func() {
			if stopWatching != nil {
				_ = stopWatching()
			}
		}()
	}
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			cnt := newCounts()
			for runCtx.Err() == nil {
				if pace != nil {
					select {
					case <-pace:
					case <-runCtx.Done():
					}
				}
				i := next.Add(1) - 1
				if i >= int64(cfg.Buyers) {
					break
				}
				if cfg.RestockDuring && i >= afterRestock {
					select {
					case <-restocked:
					case <-runCtx.Done():
					}
					if runCtx.Err() != nil {
						break
					}
				}
				p := 0
				if choices != nil {
					p = int(choices[i])
				}
				strategy := ""
				if len(sc.Sell) > 0 {
					strategy = sc.Sell[i%int64(len(sc.Sell))]
				}
				late := !cfg.RestockDuring || restockedRound[p].Load() != 0
				key := ""
				if cfg.Keys != "" {
					key = fmt.Sprintf("%s-%d", cfg.Keys, i)
				}
				t0 := time.Now()
				var (
					o       outcome
					retries int
				)
				if f, after, r := ord.fate(cfg.Seed, i); f != buyOutright {
					// Every hold carries a key, the run's or its own (see
					// holdKeys), and is sent again under it while its answer
					// says nothing: one that stays unknown is settled from
					// the ledger by its key after the run.
					if key == "" {
						key = fmt.Sprintf("%s-%d", holdKeys, i)
					}
					var h apiclient.HeldSale
					h, o, retries = c.holdRetrying(runCtx, ids[p], strategy, key, cfg.Orders.PayWithin, holdRetries)
					if o.status == http.StatusCreated {
						ord.held(ctx, p, h, t0, f, after, r)
					}
				} else {
					o, retries = c.buyRetrying(runCtx, ids[p], strategy, key, cfg.Retries)
				}
				rec.Add(o.op(w, ids[p], key, t0, time.Now()))
				t.retries.Add(int64(retries))
				// Latency is the buyer's, retries included.
				cnt.latencies = append(cnt.latencies, time.Since(t0).Microseconds())
				t.add(o, late, p, cnt)
				if o.status/100 == 2 {
					cnt.perTick[int64(time.Since(start)/Tick)]++
				}
				if cfg.Keys != "" {
					cnt.answers = append(cnt.answers, verdict.KeyedAnswer{Key: key, Definite: o.definite(), OK: o.status/100 == 2, SaleID: o.saleID})
				}
				afterAnswer(answered.Add(1))
				if progress != nil {
					progress()
				}
			}
			t.merge(cnt)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	reads := reading.stop(cfg.Readers, elapsed.Seconds())
	close(selling)
	if cfg.Strike != nil {
		if err := <-struck; err != nil {
			return Result{}, fmt.Errorf("fault: %w", err)
		}
	}
	faultUntil := time.Now()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("interrupted: %w", err)
	}
	if err := context.Cause(runCtx); err != nil {
		return Result{}, err
	}
	// Every held order must end (paid, cancelled or expired) before the
	// run's state is read: the orders' followers first, then the expiry job.
	var (
		unended  []string
		ordersEv *verdict.Orders
	)
	if ord != nil {
		ord.followers.Wait()
		if unended, err = ord.awaitEnded(ctx, firsts); err != nil {
			return Result{}, err
		}
		err := stopWatching()
		stopWatching = nil
		if err != nil {
			return Result{}, err
		}
		if ordersEv, err = ord.evidence(ctx, firsts, unended); err != nil {
			return Result{}, err
		}
	}
	// Once the fault has healed, a fresh wave must buy what is left.
	var wv *wave
	if cfg.Strike != nil && cfg.WaveWithin > 0 {
		if len(ids) > 1 {
			return Result{}, errors.New("the wave after a fault buys one product: WaveWithin needs Products of at most 1")
		}
		if wv, err = runWave(ctx, c, tr, cfg, sc, ids[0], t, &rec); err != nil {
			return Result{}, err
		}
	}

	buyersOf := make([]int64, len(ids))
	if choices == nil {
		buyersOf[0] = int64(cfg.Buyers)
	}
	for _, p := range choices {
		buyersOf[p]++
	}
	if wv != nil {
		buyersOf[0] += wv.res.Buyers
	}
	// Every product is checked on its own, exactly as a single one is.
	var (
		after     = make([]product, len(ids))
		figs      = make([]verdict.Figures, len(ids))
		ledgers   = make([][]verdict.LedgerRow, len(ids))
		okByRound = t.okByRound()
		others    = make([][]history.Op, len(ids)) // restocks made by someone else: a fault
	)
	if err := forEachProduct(ctx, ids, parallel, func(ctx context.Context, i int, id string) error {
		// The ledger's rows settle, by key, what buyers with keys (and every
		// holder) were not told.
		a, rows, err := tr.snapshot(ctx, id, before[i].Round, cfg.Keys != "" || cfg.Orders != nil)
		if err != nil {
			return fmt.Errorf("final state: %w", err)
		}
		wantRound := before[i].Round
		if cfg.RestockDuring {
			wantRound = restockedRound[i].Load()
		}
		if a.Round != wantRound && (cfg.Strike == nil || a.Round < before[i].Round) {
			return fmt.Errorf("final state: round %d, want %d: someone else restocked %s during the run", a.Round, wantRound, id)
		}
		f := t.products[i].figures(buyersOf[i])
		f.Product, f.Final = id, a.Quantity
		if wv != nil && wv.round != 0 {
			// Only the wave's buyers asked after the last restock, its own.
			f.LateSoldOut, f.LateTurnedAway = wv.counts.lateSoldOut.Load(), wv.counts.lateTurnedAway.Load()
		}
		if f.Rounds, f.Unattributed, err = readRounds(ctx, tr, id, before[i].Round, a, okByRound[i]); err != nil {
			return err
		}
		if cfg.Strike != nil {
			ours := []int64{restockedRound[i].Load()}
			if wv != nil {
				ours = append(ours, wv.round)
			}
			if others[i], err = restocksByOthers(ctx, tr, id, before[i].Round, a.Round, ours, f.Rounds, workers+len(ids), faultFrom, faultUntil); err != nil {
				return err
			}
		}
		after[i], figs[i], ledgers[i] = a, f, rows
		return nil
	}); err != nil {
		return Result{}, err
	}
	firstOf := map[string]int64{}
	for i, id := range ids {
		firstOf[id] = before[i].Round
	}
	circuits, err := tr.circuits(ctx, ids, firstOf)
	if err != nil {
		return Result{}, err
	}

	all := t.all.figures(int64(cfg.Buyers))
	res := Result{
		Strategy:       sc.Name,
		Safe:           sc.Safe,
		Buyers:         all.Buyers,
		OK:             all.OK,
		SoldOut:        all.SoldOut,
		Unavailable:    all.Unavailable,
		Errors:         all.Errors,
		Breaches:       all.Breaches,
		Unknown:        all.Unknown,
		CircuitRefused: t.all.circuitOpen.Load(),
		Retries:        t.retries.Load(),
		Switches:       switches,
		Seconds:        elapsed.Seconds(),
		Throughput:     float64(cfg.Buyers) / elapsed.Seconds(),
		LatencyMs: Latency{
			P50: ms(t.hist.ValueAtQuantile(50)),
			P95: ms(t.hist.ValueAtQuantile(95)),
			P99: ms(t.hist.ValueAtQuantile(99)),
			Max: ms(t.hist.Max()),
		},
		PerReplica:  t.perReplica,
		Timeline:    dense(t.perTick, elapsed),
		FirstErrors: t.firstErrs,
		Answers:     t.answers,
		Reads:       reads,
		Circuits:    circuits,
		Seed:        cfg.Seed,
	}
	if wv != nil {
		res.Buyers += wv.res.Buyers
		res.Wave = &wv.res
	}
	if len(ids) > 1 {
		for i := range ids {
			res.Products = append(res.Products, ProductResult{Product: ids[i], Round: after[i].Round})
		}
	} else {
		res.Round, res.Seed = after[0].Round, 0
	}
	if len(sc.Sell) != 1 && len(t.perStrategy) > 0 {
		res.PerStrategy = t.perStrategy
	}

	initial, final := map[string]history.State{}, map[string]history.State{}
	ops := rec.Ops()
	for i, id := range ids {
		initial[id] = history.State{Stock: before[i].Quantity, Round: int(before[i].Round)}
		final[id] = history.State{Stock: after[i].Quantity, Round: int(after[i].Round)}
		ops = append(ops, others[i]...)
	}
	if ordersEv != nil {
		// The units each order returned come back inside the window its
		// return certainly happened in; and the ledger's units of a round
		// count them back (figs).
		returns, placed, err := ord.returnOps(ordersEv, workers+len(ids)+1_000_000, time.Now())
		if err != nil {
			return Result{}, err
		}
		ops = append(ops, returns...)
		for i := range figs {
			for k := range figs[i].Rounds {
				for _, r := range ordersEv.Rounds {
					if r.Product == figs[i].Product && r.Round == figs[i].Rounds[k].Round {
						figs[i].Rounds[k].Returned = r.Returned
					}
				}
			}
		}
		res.Orders = ord.result(ordersEv)
		res.Orders.Returns, res.Orders.ReturnOps = placed, len(returns)
	}
	// Keys are unique across products: every product's rows settle as one.
	settled, read, rows := 0, false, []verdict.LedgerRow(nil)
	for _, l := range ledgers {
		read, rows = read || l != nil, append(rows, l...)
	}
	if read {
		settled = settle(ops, rows)
	}
	budget := DefaultHistoryBudget
	if cfg.HistoryTimeout > 0 {
		budget = history.Within(cfg.HistoryTimeout)
	}
	res.StateFrom = tr.from()
	res.History = checkHistory(initial, final, ops, budget)
	res.History.Settled = settled

	ev := verdict.Evidence{Safe: sc.Safe, Products: figs, History: &res.History.result, Circuits: circuits, CircuitRefusals: res.CircuitRefused,
		Orders: ordersEv}
	if len(ids) == 1 && ledgers[0] != nil {
		ev.Ledger = ledgers[0]
		if cfg.Keys != "" {
			ev.Answers = append([]verdict.KeyedAnswer{}, t.answers...)
		}
	}
	if cfg.Strike != nil {
		ev.Fault = &verdict.Strike{Healed: healed}
		if wv != nil {
			ev.Wave = &wv.evidence
		}
	}
	res.Judge(ev)
	return res, nil
}

// Judge has verdict.Judge judge the run from ev, and sets what it found in
// res: the verdict and its reasons, the units oversold, lost and
// undersold, each round and each product's own. ev is kept (Evidence), so
// that whoever has more of it (the fault matrix: the fault's strike, the
// default the buyers were given) adds it and judges the run again.
func (r *Result) Judge(ev verdict.Evidence) {
	j := verdict.Judge(ev)
	r.Evidence = ev
	r.Verdict, r.Reasons = j.Verdict, j.Reasons
	r.Initial, r.LedgerUnits, r.LedgerRows, r.FinalStock = 0, 0, 0, 0
	r.Oversold, r.LostUpdates, r.Undersold = 0, 0, 0
	for i, f := range ev.Products {
		pj := j.Products[i]
		pr := productResult(f, pj)
		r.Initial += pr.Initial
		r.LedgerUnits += pr.LedgerUnits
		r.LedgerRows += pr.LedgerRows
		r.FinalStock += pr.FinalStock
		r.Oversold += pr.Oversold
		r.LostUpdates += pr.LostUpdates
		r.Undersold += pr.Undersold
		if len(ev.Products) == 1 {
			r.Rounds, r.BrokenRounds = pj.Rounds, pj.BrokenRounds()
			continue
		}
		if i < len(r.Products) {
			pr.Round = r.Products[i].Round
		}
		if len(pr.Rounds) == 1 {
			pr.Rounds = nil // the product's round is in Round
		}
		if i < len(r.Products) {
			r.Products[i] = pr
		}
	}
}

// restocksByOthers is the restocks of product id that the run did not make
// itself (ours: the rounds it started) but found in the rounds after first up to
// current: a fault's. Each becomes a restock op (client from clientBase on)
// that took effect at some moment while the fault was active (from–until),
// not before the database says its round began (less a second for clock
// skew); its stock is the round's initial.
func restocksByOthers(ctx context.Context, tr truth, id string, first, current int64, ours []int64, rounds []verdict.RoundFigures,
	clientBase int, from, until time.Time) ([]history.Op, error) {
	var out []history.Op
	for n := first + 1; n <= current; n++ {
		if slices.Contains(ours, n) {
			continue
		}
		var initial int64 = -1
		for _, r := range rounds {
			if r.Round == n {
				initial = r.Initial
			}
		}
		if initial < 0 {
			return nil, fmt.Errorf("round %d of %s: not read back", n, id)
		}
		start := from
		began, err := tr.started(ctx, id, n)
		if err != nil {
			return nil, err
		}
		if at := began.Add(-time.Second); at.After(start) && at.Before(until) {
			start = at
		}
		out = append(out, history.Op{Client: clientBase + int(n-first), Product: id, Kind: history.Restock, Quantity: initial,
			Outcome: history.Sold, Remaining: -1, Round: int(n), Start: start, End: until})
	}
	return out, nil
}

// restockChecked restocks product id to stock and reads it back from tr: a fresh
// round with stock units and no sales, or an error.
func restockChecked(ctx context.Context, c *Client, tr truth, id string, stock int64) (product, error) {
	if _, err := c.restock(ctx, id, stock); err != nil {
		return product{}, err
	}
	p, err := tr.product(ctx, id)
	if err != nil {
		return product{}, fmt.Errorf("after restock: %w", err)
	}
	if p.Quantity != stock || p.Sales != 0 {
		return product{}, fmt.Errorf("after restocking %s to %d: quantity %d, %d sales in round %d; want %d and 0",
			id, stock, p.Quantity, p.Sales, p.Round, stock)
	}
	return p, nil
}

// productResult is one product's figures and judgement as --json writes them.
func productResult(f verdict.Figures, j verdict.Judgement) ProductResult {
	pr := ProductResult{
		Product: f.Product, Buyers: f.Buyers, FinalStock: f.Final, OK: f.OK, SoldOut: f.SoldOut, Unavailable: f.Unavailable,
		Oversold: j.Oversold, LostUpdates: j.LostUpdates, Undersold: j.Undersold, Rounds: j.Rounds,
		// Reasons other than undersold are broken invariants, whether the strategy claims safety or not.
		Broken: len(j.Reasons) > 0 && j.Verdict != verdict.Undersold,
	}
	for _, r := range f.Rounds {
		pr.Initial += r.Initial
		pr.LedgerUnits += r.Units
		pr.LedgerRows += r.Rows
	}
	return pr
}

// readRounds reads every round from first to the current one (after) back
// from c (Postgres, or the server) and pairs each with the 2xx answers that named it
// (okByRound; round 0 is answers that named none, which belong to first
// when the run sold in one round only). It also returns how many 2xx named
// no round of the run.
func readRounds(ctx context.Context, c truth, id string, first int64, after product, okByRound map[int64]int64) ([]verdict.RoundFigures, int64, error) {
	var out []verdict.RoundFigures
	for n := first; n <= after.Round; n++ {
		rf := verdict.RoundFigures{Round: n, OK: okByRound[n]}
		if n == after.Round {
			rf.Current, rf.Initial, rf.Units, rf.Rows = true, after.Initial, after.Sold, after.Sales
		} else {
			r, err := c.round(ctx, id, n)
			if err != nil {
				return nil, 0, fmt.Errorf("read round %d of %s: %w", n, id, err)
			}
			rf.Initial, rf.Units, rf.Rows = r.Initial, r.Sold, r.Sales
		}
		out = append(out, rf)
	}
	var unattributed int64
	for n, ok := range okByRound {
		if n < first || n > after.Round {
			unattributed += ok
		}
	}
	if len(out) == 1 && okByRound[0] > 0 {
		// A fleet that does not say the round sold in the only one there was.
		out[0].OK += okByRound[0]
		unattributed -= okByRound[0]
	}
	return out, unattributed, nil
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, (60 * time.Second).Microseconds(), 3)
}

func ms(us int64) float64 { return float64(us) / 1000 }

// Tick is the width of one slot of Result.Timeline.
const Tick = 100 * time.Millisecond

// dense lays the counts by Tick out as a slice covering elapsed.
func dense(byTick map[int64]int64, elapsed time.Duration) []int64 {
	out := make([]int64, int64(elapsed/Tick)+1)
	for i, n := range byTick {
		if i >= 0 && i < int64(len(out)) {
			out[i] += n
		}
	}
	return out
}

// waves paces a run's buyers: it hands out up to concurrency starts at
// once, a wave every spread ÷ (buyers ÷ concurrency), until ctx ends. The
// buyers of a paced run still arrive together, as many as unpaced, and so
// still race each other for the last units; only the gaps between the
// waves are longer.
func waves(ctx context.Context, spread time.Duration, buyers, concurrency int) <-chan struct{} {
	starts := make(chan struct{}, concurrency)
	n := max(1, buyers/max(concurrency, 1))
	go func() {
		t := time.NewTicker(max(spread/time.Duration(n), time.Millisecond))
		defer t.Stop()
		for {
			// Top the wave up to concurrency (only this goroutine sends,
			// so the room counted here is there).
			for range cap(starts) - len(starts) {
				starts <- struct{}{}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return starts
}
