package stampede

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target is the fleet a crowd reads from.
type Target struct {
	// URL is the front door (nginx), e.g. "http://127.0.0.1:8080": where
	// the readers send GET /products/{id}.
	URL string
	// Replicas are the replicas' own base URLs, whose /metrics are read
	// before and after; every replica behind URL must be here, or its
	// Postgres reads go uncounted.
	Replicas []string
	// RedisURL is the Redis the replicas cache in, to see the product's
	// entry expire before a crowd arrives (OneExpiry).
	RedisURL string
	// Product is the product read; it must exist.
	Product string
}

// Crowd is what a crowd of readers got.
type Crowd struct {
	Readers int     `json:"readers"`
	Seconds float64 `json:"seconds"`
	// Answers is the 200 answers; Failed the others by status ("none" for
	// no answer at all).
	Answers int64            `json:"answers"`
	Failed  map[string]int64 `json:"failed,omitempty"`
	// PostgresReads is the rise of the replicas'
	// inventory_product_reads_total{source="postgres"} over the crowd's
	// time: the Postgres reads it cost.
	PostgresReads int64 `json:"postgres_reads"`
	// LatencyMs is the answers' latency percentiles, as each reader timed
	// its request.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// AnswersPerSecond is the crowd's 200 answers per second.
func (c Crowd) AnswersPerSecond() float64 { return rate(c.Answers, c.Seconds) }

// PostgresPerSecond is the Postgres reads the crowd cost per second.
func (c Crowd) PostgresPerSecond() float64 { return rate(c.PostgresReads, c.Seconds) }

// PostgresPer1000 is the Postgres reads per 1,000 answers.
func (c Crowd) PostgresPer1000() float64 {
	if c.Answers == 0 {
		return 0
	}
	return 1000 * float64(c.PostgresReads) / float64(c.Answers)
}

func rate(n int64, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}

// metricLine starts the counter line Postgres reads are read from.
const metricLine = `inventory_product_reads_total{source="postgres"} `

// entryKey is the product's entry in the replicas' shared cache, as
// internal/productcache names it (redis.go): the hash tag keeps it in the
// slot of the product's other keys.
func entryKey(id string) string { return "product:{" + id + "}" }

// reader is one member of a crowd: a connection of its own to the front
// door (a crowd is that many browsers), and what it was answered.
type reader struct {
	lat    []time.Duration
	ok     int64
	failed map[string]int64
}

// newClient is an HTTP client that keeps a connection per reader open.
func newClient(readers int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = readers
	tr.MaxIdleConnsPerHost = readers
	tr.MaxConnsPerHost = readers
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get sends one anonymous GET /products/{id} and notes its answer.
func (r *reader) get(ctx context.Context, c *http.Client, u string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		r.fail("none")
		return
	}
	began := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			r.fail("none")
		}
		return
	}
	// Read to the end, so that the connection is reused.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.fail(strconv.Itoa(resp.StatusCode))
		return
	}
	r.ok++
	r.lat = append(r.lat, time.Since(began))
}

func (r *reader) fail(kind string) {
	if r.failed == nil {
		r.failed = map[string]int64{}
	}
	r.failed[kind]++
}

// productURL is the product's anonymous read through the front door.
func (t Target) productURL() string {
	return strings.TrimRight(t.URL, "/") + "/products/" + url.PathEscape(t.Product)
}

// Loop keeps n readers reading the product through the front door, each
// on a connection of its own and in a loop (the next request as soon as
// the last is answered), for d, and counts what it cost Postgres.
func Loop(ctx context.Context, t Target, n int, d time.Duration) (Crowd, error) {
	if n < 1 || d <= 0 {
		return Crowd{}, fmt.Errorf("stampede: %d readers for %s: want at least one reader for a positive time", n, d)
	}
	c := newClient(n)
	defer c.CloseIdleConnections()
	u := t.productURL()
	before, err := postgresReads(ctx, c, t.Replicas)
	if err != nil {
		return Crowd{}, err
	}
	// The time's end stops each reader after its request in flight has
	// been answered, not in the middle of it: a request cut short would
	// count its Postgres read and not its answer.
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	rs := make([]reader, n)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range rs {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				rs[i].get(ctx, c, u)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if err := ctx.Err(); err != nil {
		return Crowd{}, fmt.Errorf("stampede: loop: %w", err)
	}
	after, err := postgresReads(ctx, c, t.Replicas)
	if err != nil {
		return Crowd{}, err
	}
	return tally(rs, elapsed, after-before), nil
}

// OneExpiry measures one expiry of the product's cached entry under a
// crowd of n readers: each reader first reads once (opening its
// connection; the crowd fills the entry), then all wait until Redis has
// dropped the entry, its TTL run out with nobody reading, and then every
// reader reads once at the same moment. The Postgres reads counted are
// those of that one moment: what an entry that expires costs when the
// crowd comes back to it (with the cache off, every read is one).
func OneExpiry(ctx context.Context, t Target, n int) (Crowd, error) {
	if n < 1 {
		return Crowd{}, fmt.Errorf("stampede: %d readers: want at least one", n)
	}
	opts, err := redis.ParseURL(t.RedisURL)
	if err != nil {
		return Crowd{}, fmt.Errorf("stampede: the fleet's Redis URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	c := newClient(n)
	defer c.CloseIdleConnections()
	u := t.productURL()

	// Each reader opens its connection with a read of its own; then they
	// wait at the gate, connections open, as a crowd with the page open.
	rs := make([]reader, n)
	gate := make(chan struct{})
	var warm, done sync.WaitGroup
	warm.Add(n)
	for i := range rs {
		done.Go(func() {
			var w reader
			w.get(ctx, c, u)
			warm.Done()
			if w.ok != 1 {
				rs[i].failed = w.failed // the warm-up failed: say so in the figures
				return
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
			rs[i].get(ctx, c, u)
		})
	}
	warm.Wait()
	// No one reads now: the entry lives out its TTL and Redis drops it.
	if err := waitGone(ctx, rdb, entryKey(t.Product)); err != nil {
		close(gate)
		done.Wait()
		return Crowd{}, err
	}
	before, err := postgresReads(ctx, c, t.Replicas)
	if err != nil {
		close(gate)
		done.Wait()
		return Crowd{}, err
	}
	began := time.Now()
	close(gate)
	done.Wait()
	elapsed := time.Since(began)
	if err := ctx.Err(); err != nil {
		return Crowd{}, fmt.Errorf("stampede: one expiry: %w", err)
	}
	after, err := postgresReads(ctx, c, t.Replicas)
	if err != nil {
		return Crowd{}, err
	}
	return tally(rs, elapsed, after-before), nil
}

// waitGone waits until Redis no longer has key: every few milliseconds,
// for at most the cache's longest TTL and a margin.
func waitGone(ctx context.Context, rdb *redis.Client, key string) error {
	const longest = 10*time.Second + 5*time.Second // productcache.MaxTTL and a margin
	ctx, cancel := context.WithTimeout(ctx, longest)
	defer cancel()
	for {
		n, err := rdb.Exists(ctx, key).Result()
		switch {
		case err != nil:
			return fmt.Errorf("stampede: wait for %s to expire: %w", key, err)
		case n == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stampede: wait for %s to expire: %w", key, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// tally sums the readers' answers.
func tally(rs []reader, elapsed time.Duration, pgReads int64) Crowd {
	cr := Crowd{Readers: len(rs), Seconds: elapsed.Seconds(), PostgresReads: pgReads}
	var lat []time.Duration
	for _, r := range rs {
		cr.Answers += r.ok
		lat = append(lat, r.lat...)
		for k, v := range r.failed {
			if cr.Failed == nil {
				cr.Failed = map[string]int64{}
			}
			cr.Failed[k] += v
		}
	}
	slices.Sort(lat)
	ms := func(q float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	cr.P50Ms, cr.P99Ms = ms(0.50), ms(0.99)
	if len(lat) > 0 {
		cr.MaxMs = float64(lat[len(lat)-1].Microseconds()) / 1000
	}
	return cr
}

// postgresReads is the sum of the replicas' Postgres reads of products so
// far, from their /metrics.
func postgresReads(ctx context.Context, c *http.Client, replicas []string) (int64, error) {
	if len(replicas) == 0 {
		return 0, errors.New("stampede: no replica to read the metrics of")
	}
	var sum int64
	for _, base := range replicas {
		n, err := replicaReads(ctx, c, strings.TrimRight(base, "/")+"/metrics")
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// replicaReads reads one replica's counter of Postgres reads of products.
func replicaReads(ctx context.Context, c *http.Client, u string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("stampede: metrics %s: %w", u, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("stampede: metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stampede: metrics %s: %s", u, resp.Status)
	}
	return parseReads(resp.Body, u)
}

// parseReads finds the counter of Postgres reads of products in a
// Prometheus text exposition.
func parseReads(r io.Reader, from string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), metricLine)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
		if err != nil {
			return 0, fmt.Errorf("stampede: metrics %s: %q: %w", from, sc.Text(), err)
		}
		return int64(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("stampede: metrics %s: %w", from, err)
	}
	return 0, fmt.Errorf("stampede: metrics %s: no %s line (not an inventory replica, or one without the product cache's metrics)", from, strings.TrimSpace(metricLine))
}
