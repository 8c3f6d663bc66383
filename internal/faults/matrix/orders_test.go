package matrix

import (
	"slices"
	"strings"
	"testing"
	"time"

	"inventory/internal/load"
	"inventory/internal/verdict"
)

// TestOrdersMode: the orders mode's scenario gets the fleet's sweep bound
// (lock TTL + sweep interval + 1 s) unless it has one, the fleet gets the
// sweep interval asked for, and the matrix says in one line what its
// buyers did; without orders, none of it.
func TestOrdersMode(t *testing.T) {
	o := Defaults()
	if o.orders() != nil || describeOrders(o.orders()) != "" {
		t.Errorf("Defaults().orders() = %+v, want nil (buyers buy outright)", o.orders())
	}
	if _, ok := matrixFleet(o, "bin").Env["INVENTORY_ORDER_SWEEP_INTERVAL"]; ok {
		t.Errorf("matrixFleet(Defaults()) sets INVENTORY_ORDER_SWEEP_INTERVAL, want the service's default")
	}
	s := DefaultOrders()
	if err := (func() error { s := s; s.SweepBound = time.Second; return s.Validate() })(); err != nil {
		t.Errorf("DefaultOrders() is not a valid scenario: %v", err)
	}
	o.Orders = &s
	got := o.orders()
	if want := load.SweepBound(o.LockTTL, DefaultSweepInterval); got.SweepBound != want || got.PayWithin != s.PayWithin {
		t.Errorf("orders() = %+v, want DefaultOrders with the sweep bound %v", got, want)
	}
	if s.SweepBound != 0 {
		t.Errorf("orders() changed Options.Orders: %+v", s)
	}
	o.SweepInterval, o.LockTTL = 200*time.Millisecond, 2*time.Second
	if got, want := o.orders().SweepBound, 4200*time.Millisecond; got != want {
		t.Errorf("orders() with lock TTL 2s and sweep 200ms: bound %v, want %v", got, want)
	}
	if env := matrixFleet(o, "bin").Env; env["INVENTORY_ORDER_SWEEP_INTERVAL"] != "200ms" {
		t.Errorf("matrixFleet: INVENTORY_ORDER_SWEEP_INTERVAL %q, want 200ms", env["INVENTORY_ORDER_SWEEP_INTERVAL"])
	}
	own := s
	own.SweepBound = 10 * time.Second
	o.Orders = &own
	if got := o.orders().SweepBound; got != 10*time.Second {
		t.Errorf("orders() with a bound of its own: %v, want 10s kept", got)
	}
	if d := describeOrders(o.orders()); !strings.Contains(d, "pay_within 1s") || !strings.Contains(d, "sweep bound 10s") {
		t.Errorf("describeOrders = %q, want its pay_within and sweep bound named", d)
	}
}

// TestSoldOutOnceEnded: in orders mode, only the sold-outs sent to the
// wave (every held order ended by then) are held against the stock after
// the heal: one sent before, when none was left, is made true by units
// that came back later and is the history check's to judge.
func TestSoldOutOnceEnded(t *testing.T) {
	t0 := time.Now()
	sent := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	if got := soldOutOnceEnded(sent, nil); got != nil {
		t.Errorf("soldOutOnceEnded(no wave) = %v, want none", got)
	}
	got := soldOutOnceEnded(sent, &verdict.Wave{Began: t0.Add(2 * time.Second)})
	if want := sent[2:]; !slices.Equal(got, want) {
		t.Errorf("soldOutOnceEnded(wave began at +2s) = %v, want %v", got, want)
	}
}
