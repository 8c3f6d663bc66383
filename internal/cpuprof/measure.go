package cpuprof

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"inventory/internal/client"
)

// Options are a measurement's settings; the zero value is the issue's
// table: 64 clients, 5 s a kind after 1 s of warm-up.
type Options struct {
	// Clients is how many closed-loop clients send at once, each on a
	// keep-alive connection of its own, as wrk's connections; default 64.
	Clients int
	// Duration is each kind's window, over which CPU and answers are
	// counted; default 5s.
	Duration time.Duration
	// Warmup is how long the clients send before the window opens (the
	// connections made, the replicas' pools full, a batch's queue
	// flowing); default 1s.
	Warmup time.Duration
	// ProfileDir, if set, gets each replica's CPU profile of each kind's
	// window (/debug/pprof/profile), as KIND-REPLICA.pprof. The profiler
	// costs the replicas a little CPU, counted in the window.
	ProfileDir string
	// Proc is where /proc is; default "/proc".
	Proc string
	// Progress, if set, is told as each kind starts and ends.
	Progress func(msg string)
}

func (o *Options) defaults() {
	if o.Clients == 0 {
		o.Clients = 64
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = time.Second
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
}

// Row is one kind's figures.
type Row struct {
	Kind     string `json:"kind"`
	Title    string `json:"title"`
	Strategy string `json:"strategy,omitempty"`
	// Seconds is the window's length as measured.
	Seconds float64 `json:"seconds"`
	// Answers is every answer within the window; Expected the status the
	// kind's answers should have ("200", "409", "2xx"), Unexpected the
	// answers with another (a sale's 503, say), by status in Statuses.
	Answers    int64            `json:"answers"`
	Expected   string           `json:"expected"`
	Unexpected int64            `json:"unexpected"`
	Statuses   map[string]int64 `json:"statuses"`
	PerSecond  float64          `json:"answers_per_s"`
	// CPUms is each group's CPU in the window, in milliseconds (the
	// groups' names, and each replica's).
	CPUms map[string]float64 `json:"cpu_ms"`
	// PerAnswer is each group's CPU per answer, in microseconds.
	PerAnswer map[string]float64 `json:"us_per_answer"`
	// XHealthz is the fleet's CPU per answer (every process but the load
	// generator) divided by its CPU per GET /healthz in the same run; 0
	// when /healthz was not measured.
	XHealthz float64 `json:"x_healthz,omitempty"`
	// Profiles are the replicas' CPU profiles of the window, with
	// Options.ProfileDir.
	Profiles []string `json:"profiles,omitempty"`
}

// Measure drives each kind in turn, with o.Clients closed-loop clients
// through f.URL, and reads every group's CPU before and after each
// kind's window.
func Measure(ctx context.Context, f Fleet, kinds []Kind, o Options) ([]Row, error) {
	o.defaults()
	if o.Clients < 1 || o.Duration <= 0 || o.Warmup < 0 {
		return nil, fmt.Errorf("measure CPU: want clients ≥ 1, a positive duration and a warm-up ≥ 0, got %d, %s, %s", o.Clients, o.Duration, o.Warmup)
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("measure CPU: profile directory: %w", err)
		}
	}
	api := client.New(f.URL, client.Options{AdminToken: f.AdminToken})
	hc := &http.Client{
		Timeout: time.Minute,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: o.Clients, MaxConnsPerHost: o.Clients,
			IdleConnTimeout: time.Minute, DisableCompression: true,
		},
	}
	defer hc.CloseIdleConnections()
	var rows []Row
	for _, k := range kinds {
		if k.prepare != nil {
			if err := k.prepare(ctx, api, &k); err != nil {
				return rows, fmt.Errorf("measure CPU of %s: %w", k.Title, err)
			}
		}
		o.Progress(fmt.Sprintf("%s: %d clients, %s of warm-up, then %s measured …", k.Title, o.Clients, o.Warmup, o.Duration))
		row, err := measureKind(ctx, hc, f, k, o)
		if err != nil {
			return rows, fmt.Errorf("measure CPU of %s: %w", k.Title, err)
		}
		o.Progress(fmt.Sprintf("%s: %.0f answers/s, %.0f µs of fleet CPU an answer", k.Title, row.PerSecond, row.PerAnswer[GroupFleet]))
		rows = append(rows, row)
	}
	Ratios(rows)
	return rows, nil
}

// Ratios sets each row's XHealthz from the row of kind "healthz", if any.
func Ratios(rows []Row) {
	floor := 0.0
	for _, r := range rows {
		if r.Kind == "healthz" {
			floor = r.PerAnswer[GroupFleet]
		}
	}
	for i := range rows {
		rows[i].XHealthz = 0
		if floor > 0 {
			rows[i].XHealthz = round(rows[i].PerAnswer[GroupFleet]/floor, 2)
		}
	}
}

// tally counts the answers of the clients of one kind, by status.
type tally struct {
	status [600]atomic.Int64
}

func (t *tally) snapshot() (counts map[int]int64, total int64) {
	counts = map[int]int64{}
	for s := range t.status {
		if n := t.status[s].Load(); n > 0 {
			counts[s] = n
			total += n
		}
	}
	return counts, total
}

// measureKind runs the clients of k through the warm-up and the window
// and returns the window's figures.
func measureKind(ctx context.Context, hc *http.Client, f Fleet, k Kind, o Options) (Row, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		t    tally
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for range o.Clients {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				status, err := send(ctx, hc, f, k)
				if err != nil {
					if ctx.Err() == nil {
						cancel(err)
					}
					return
				}
				if status < 100 || status >= len(t.status) {
					cancel(fmt.Errorf("an answer with status %d", status))
					return
				}
				t.status[status].Add(1)
			}
		})
	}
	// The clients stop when the window ends, each after its answer: a
	// request cut short would make nginx log a 499 and a replica do work
	// for nobody.
	defer func() { stop.Store(true); wg.Wait() }()

	if err := pause(ctx, o.Warmup); err != nil {
		return Row{}, err
	}
	before, err := readSample(f, o.Proc)
	if err != nil {
		return Row{}, err
	}
	counts0, _ := t.snapshot()
	start := time.Now()
	profiles := startProfiles(ctx, f, k, o)
	defer func() {
		if !profiles.done {
			cancel(errors.New("the measurement ended early"))
			_, _ = profiles.wait()
		}
	}()
	if err := pause(ctx, o.Duration); err != nil {
		return Row{}, err
	}
	after, err := readSample(f, o.Proc)
	if err != nil {
		return Row{}, err
	}
	counts1, _ := t.snapshot()
	seconds := time.Since(start).Seconds()
	paths, err := profiles.wait()
	if err != nil {
		return Row{}, err
	}
	used, err := Used(before, after)
	if err != nil {
		return Row{}, err
	}
	row := newRow(k, seconds, diff(counts1, counts0), used)
	row.Profiles = paths
	if row.Answers == 0 {
		return row, fmt.Errorf("no answer within the %s window", o.Duration)
	}
	return row, nil
}

// pause waits d, or returns why ctx ended (a client's error included).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// send sends one request of k and reads its whole answer, on a kept-alive
// connection.
func send(ctx context.Context, hc *http.Client, f Fleet, k Kind) (int, error) {
	var body io.Reader
	if k.body != nil {
		body = bytes.NewReader(k.body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, f.URL+k.path, body)
	if err != nil {
		return 0, err
	}
	if k.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k.admin {
		req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("%s %s: reading the answer: %w", k.method, k.path, err)
	}
	return resp.StatusCode, nil
}

// readSample reads each group's CPU now.
func readSample(f Fleet, proc string) (Sample, error) {
	self, err := ReadSelf(proc)
	if err != nil {
		return nil, err
	}
	t, err := ReadTable(proc)
	if err != nil {
		return nil, err
	}
	return f.Sample(t, self)
}

func diff(after, before map[int]int64) map[int]int64 {
	out := map[int]int64{}
	for s, n := range after {
		if d := n - before[s]; d > 0 {
			out[s] = d
		}
	}
	return out
}

// newRow is kind k's row: answers by status in a window of seconds, and
// the ticks each group used in it.
func newRow(k Kind, seconds float64, counts map[int]int64, used map[string]uint64) Row {
	row := Row{Kind: k.Name, Title: k.Title, Strategy: k.Strategy, Seconds: round(seconds, 3),
		Expected: k.expect, Statuses: map[string]int64{}, CPUms: map[string]float64{}, PerAnswer: map[string]float64{}}
	for s, n := range counts {
		row.Answers += n
		row.Statuses[strconv.Itoa(s)] = n
		if !expected(row.Expected, s) {
			row.Unexpected += n
		}
	}
	if seconds > 0 {
		row.PerSecond = round(float64(row.Answers)/seconds, 1)
	}
	for g, ticks := range used {
		ms := float64(ticks) * 1000 / TicksPerSecond
		row.CPUms[g] = ms
		if row.Answers > 0 {
			row.PerAnswer[g] = round(ms*1000/float64(row.Answers), 1)
		}
	}
	return row
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// profiles are the replicas' CPU profiles of one window, being taken.
type profiles struct {
	wg    sync.WaitGroup
	paths []string
	errs  []error
	done  bool // wait has returned
}

// wait waits for every profile and returns the files written.
func (p *profiles) wait() ([]string, error) {
	p.wg.Wait()
	p.done = true
	if p.paths == nil {
		return nil, nil
	}
	return p.paths, errors.Join(p.errs...)
}

// startProfiles asks each replica for its CPU profile of the window
// (whole seconds, so a little longer than the window) when o.ProfileDir
// is set.
func startProfiles(ctx context.Context, f Fleet, k Kind, o Options) *profiles {
	p := &profiles{}
	if o.ProfileDir == "" {
		return p
	}
	seconds := int(math.Ceil(o.Duration.Seconds()))
	p.paths = make([]string, len(f.Replicas))
	p.errs = make([]error, len(f.Replicas))
	for i, r := range f.Replicas {
		p.wg.Go(func() {
			c := client.New(r.URL, client.Options{AdminToken: f.AdminToken,
				HTTPClient: &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}})
			b, err := c.Profile(ctx, "profile", seconds)
			if err != nil {
				p.errs[i] = fmt.Errorf("CPU profile of %s: %w", r.Name, err)
				return
			}
			p.paths[i] = filepath.Join(o.ProfileDir, k.Name+"-"+r.Name+".pprof")
			if err := os.WriteFile(p.paths[i], b, 0o644); err != nil {
				p.errs[i] = fmt.Errorf("CPU profile of %s: %w", r.Name, err)
			}
		})
	}
	return p
}
