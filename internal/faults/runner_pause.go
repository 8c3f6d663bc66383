package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/client"
	"inventory/internal/fleet"
	"inventory/internal/jobs"
	"inventory/internal/localstack"
)

// expiryJob is the expiry job's name: its task label in the replicas'
// job metrics, its row in job_fences, and its runner's name in the order
// history ("expiry@<replica>"), as docs/orders.md gives them.
const expiryJob = "order-expiry"

// RunnerPause is runner-pause: the replica that runs the expiry job (its
// /metrics say inventory_job_runner{task="order-expiry"} 1) is stopped
// (SIGSTOP, the server itself) for the job's takeover bound plus the lock
// TTL (jobs.TakeoverBound(ttl) + ttl), past its lease, then continued
// (SIGCONT). Another replica must take the job over within the bound,
// with a newer fencing token, and the paused runner, waking with a sweep
// it had begun, must write nothing: its fence is refused. It strikes once
// a sweep of due orders is in flight, or, when none is seen within two
// sweeps' time, between sweeps. It applies to every strategy: it is about
// the job, not the sale. What each strike saw is kept (Strikes); the
// fault judges nothing, the order invariants read from Postgres do.
type RunnerPause struct {
	mu      sync.Mutex
	outage  time.Duration // the last strike's RowsHeld
	strikes []RunnerStrike
	paused  *fleet.Replica
	t       Target
	cur     RunnerStrike
	before  jobFigures // the paused replica's, before the pause
}

// RunnerStrike is what one runner-pause saw.
type RunnerStrike struct {
	// Runner is the replica paused, the expiry job's runner then;
	// SweepInFlight whether one of its sweeps was seen in flight at the
	// pause.
	Runner        string
	SweepInFlight bool
	PausedAt      time.Time
	Paused        time.Duration
	// TakenBy is the first replica whose metrics said it runs the job
	// while Runner was paused ("" if none did), TakeoverAfter how long
	// after the pause; Bound is jobs.TakeoverBound of the lock TTL.
	TakenBy       string
	TakeoverAfter time.Duration
	Bound         time.Duration
	// TokenBefore and TokenAfter are the job's newest fencing token in
	// Postgres (job_fences) before the pause and once the fault healed.
	TokenBefore, TokenAfter int64
	// Refused is the runs the paused runner counted lost or failed
	// (inventory_job_runs_total{outcome="lost"|"failed"}) from before the
	// pause until it had stopped running the job after it woke: each a
	// sweep its fence, or its lost lease, cut short.
	Refused int64
	// ClaimWaited is the longest the new runner's claim of the job's fence
	// was seen waiting on a lock in Postgres during the pause (0: never
	// seen waiting): the paused runner, stopped inside its sweep's
	// transaction, holds the fence row until it wakes, and no sweep
	// expires anything meanwhile.
	ClaimWaited time.Duration
	// RowsHeld is how long after the pause a transaction begun before it
	// was still open in Postgres: the paused replica's, holding their rows
	// (a product's stock row among them) until Postgres ends each after it
	// sat idle for the replica's idle timeout (min(INVENTORY_LOCK_TTL,
	// INVENTORY_WORK_DELAY + 5 s)), one queued behind another in turn, and
	// those of the other replicas waiting behind them. Nothing returns
	// units to those rows meanwhile: it is the fault's outage
	// (Outage), which the sweep's bound is extended by.
	RowsHeld time.Duration
	// WroteAfterPause is the orders the paused runner's sweeps expired at
	// or after the pause (order_events by expiry@<Runner>); the fence
	// lets through only a transaction that had claimed the job before the
	// takeover.
	WroteAfterPause int64
}

// Name implements Fault.
func (*RunnerPause) Name() string { return "runner-pause" }

// Outage implements Outage: how long after the last pause the paused
// replica's transactions held their rows (RunnerStrike.RowsHeld).
func (f *RunnerPause) Outage() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outage
}

// Scope implements Scoped.
func (*RunnerPause) Scope() Scope { return ScopeFleet }

// Strikes is what every strike of f saw, oldest first.
func (f *RunnerPause) Strikes() []RunnerStrike {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RunnerStrike(nil), f.strikes...)
}

// Inject implements Fault.
func (f *RunnerPause) Inject(ctx context.Context, t Target) error {
	runner, err := f.findRunner(ctx, t)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, t.Fleet.PostgresURL)
	if err != nil {
		return fmt.Errorf("runner-pause: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := RunnerStrike{Runner: runner.Instance, Bound: jobs.TakeoverBound(t.LockTTL), Paused: jobs.TakeoverBound(t.LockTTL) + t.LockTTL}
	if st.TokenBefore, err = jobToken(ctx, conn); err != nil {
		return err
	}
	before, err := readJobFigures(ctx, runner.URL)
	if err != nil {
		return err
	}
	// A sweep in flight: the paused runner wakes inside it, past its
	// lease. Sweeps of due orders take milliseconds once a second, so the
	// look is bounded; a runner paused between sweeps is struck all the same.
	look, cancel := context.WithTimeout(ctx, 2*time.Second+2*t.LockTTL)
	err = statementInFlight(look, t, "a sweep of the expiry job", `INSERT INTO job_fences%`, `UPDATE orders SET state = 'expired'%`,
		`SELECT DISTINCT product_id FROM orders WHERE state = 'held' AND expires_at <= now()%`)
	cancel()
	switch {
	case err == nil:
		st.SweepInFlight = true
	case errors.Is(err, ErrMissed), ctx.Err() != nil:
		return err
	}
	f.mu.Lock()
	f.paused, f.t, f.before = runner, t, before
	f.mu.Unlock()
	if err := localstack.Pause(runner.Pid()); err != nil {
		return fmt.Errorf("pause %s: %w", runner.Instance, err)
	}
	st.PausedAt = time.Now()
	// Who takes over, and when: the other replicas' metrics, every 20 ms.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for until := st.PausedAt.Add(st.Paused); time.Now().Before(until); {
		if st.TakenBy == "" {
			for _, r := range t.Fleet.Replicas {
				if r == runner {
					continue
				}
				if fig, err := readJobFigures(ctx, r.URL); err == nil && fig.runner {
					st.TakenBy, st.TakeoverAfter = r.Instance, time.Since(st.PausedAt)
					break
				}
			}
		}
		var waited float64 // seconds
		if err := conn.QueryRow(ctx, `
			SELECT coalesce(extract(epoch FROM max(clock_timestamp() - query_start)), 0)::float8 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'
			  AND ltrim(query, E' \t\r\n') LIKE 'INSERT INTO job_fences%'`).Scan(&waited); err == nil {
			st.ClaimWaited = max(st.ClaimWaited, time.Duration(waited*float64(time.Second)))
		}
		var open int
		if err := conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
			  AND state <> 'idle' AND xact_start < $1`, st.PausedAt).Scan(&open); err == nil && open > 0 {
			st.RowsHeld = time.Since(st.PausedAt)
		}
		select {
		case <-ctx.Done():
			f.set(st)
			return ctx.Err()
		case <-tick.C:
		}
	}
	f.set(st)
	return nil
}

func (f *RunnerPause) set(st RunnerStrike) {
	f.mu.Lock()
	f.cur, f.outage = st, st.RowsHeld
	f.mu.Unlock()
}

// Heal implements Fault: the runner is continued, and once it no longer
// runs the job (its lease was lost while it slept) what it did is read.
func (f *RunnerPause) Heal(ctx context.Context) error {
	f.mu.Lock()
	r, t, st, before := f.paused, f.t, f.cur, f.before
	f.paused = nil
	f.mu.Unlock()
	if r == nil {
		return nil
	}
	if err := syscall.Kill(r.Pid(), syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", r.Instance, err)
	}
	// It learns it lost its lease at its watchdog's next renewal (a third
	// of the TTL) or its next run; a lease kept (nobody took over) keeps it
	// the runner, and then there is nothing more to wait for.
	var after jobFigures
	deadline := time.Now().Add(jobs.TakeoverBound(t.LockTTL))
	for {
		fig, err := readJobFigures(ctx, r.URL)
		if err == nil {
			after = fig
			if !fig.runner || st.TakenBy == "" || time.Now().After(deadline) {
				break
			}
		} else if time.Now().After(deadline) {
			return fmt.Errorf("runner-pause: %s after SIGCONT: %w", r.Instance, err)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	st.Refused = after.lostOrFailed - before.lostOrFailed
	// The takeover is held to its bound here, not by the orders' verdict:
	// the sweep's bound is extended by the rows the paused replica held
	// (Outage), which must not forgive a job nobody took over.
	if st.TakenBy == "" || st.TakeoverAfter > st.Bound {
		f.mu.Lock()
		f.strikes = append(f.strikes, st)
		f.mu.Unlock()
		return fmt.Errorf("runner-pause: the expiry job was not taken over from %s within its bound of %v (taken by %q after %v)",
			st.Runner, st.Bound, st.TakenBy, st.TakeoverAfter)
	}
	conn, err := pgx.Connect(ctx, t.Fleet.PostgresURL)
	if err != nil {
		return fmt.Errorf("runner-pause: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if st.TokenAfter, err = jobToken(ctx, conn); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM order_events WHERE by = $1 AND state = 'expired' AND at >= $2`,
		"expiry@"+r.Instance, st.PausedAt).Scan(&st.WroteAfterPause); err != nil {
		return fmt.Errorf("runner-pause: read %s's expiries: %w", r.Instance, err)
	}
	slog.Info("runner-pause", "runner", st.Runner, "sweep_in_flight", st.SweepInFlight, "taken_by", st.TakenBy,
		"takeover_after", st.TakeoverAfter, "bound", st.Bound, "token_before", st.TokenBefore, "token_after", st.TokenAfter,
		"refused", st.Refused, "claim_waited", st.ClaimWaited, "rows_held", st.RowsHeld, "wrote_after_pause", st.WroteAfterPause)
	f.mu.Lock()
	f.strikes = append(f.strikes, st)
	f.mu.Unlock()
	return nil
}

// findRunner waits until exactly one replica says it runs the expiry job.
func (f *RunnerPause) findRunner(ctx context.Context, t Target) (*fleet.Replica, error) {
	var runner *fleet.Replica
	err := waitFor(ctx, t, "the expiry job's runner", func(ctx context.Context) (bool, error) {
		runner = nil
		for _, r := range t.Fleet.Replicas {
			fig, err := readJobFigures(ctx, r.URL)
			if err != nil {
				return false, nil // a replica restarting: look again
			}
			if fig.runner {
				if runner != nil {
					return false, nil // a handover: two say so for a moment
				}
				runner = r
			}
		}
		return runner != nil, nil
	})
	return runner, err
}

// jobToken is the newest fencing token any runner of the expiry job
// claimed in Postgres (0 if none has).
func jobToken(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var token int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(token), 0) FROM job_fences WHERE job = $1`, expiryJob).Scan(&token); err != nil {
		return 0, fmt.Errorf("runner-pause: read the expiry job's fence: %w", err)
	}
	return token, nil
}

// jobFigures is what one replica's /metrics say of the expiry job.
type jobFigures struct {
	runner       bool  // inventory_job_runner is 1
	lostOrFailed int64 // inventory_job_runs_total with outcome lost or failed
}

// readJobFigures scrapes the replica at url.
func readJobFigures(ctx context.Context, url string) (jobFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	metrics, err := client.New(url, client.Options{HTTPClient: http.DefaultClient}).Metrics(ctx)
	if err != nil {
		return jobFigures{}, fmt.Errorf("metrics of %s: %w", url, err)
	}
	var fig jobFigures
	task := `task="` + expiryJob + `"`
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(rest, task) {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		switch {
		case name == "inventory_job_runner":
			fig.runner = v == 1
		case name == "inventory_job_runs_total" && (strings.Contains(labels, `outcome="lost"`) || strings.Contains(labels, `outcome="failed"`)):
			fig.lostOrFailed += int64(v)
		}
	}
	return fig, sc.Err()
}
