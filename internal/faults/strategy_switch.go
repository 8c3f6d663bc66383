package faults

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// StrategySwitch is strategy-switch: while a sale is inside its critical
// section, the fleet default is switched from the run's strategy to
// another of the same kind (safe to safe, unsafe to unsafe), held until
// every replica behind nginx sells with it, and switched back by Heal, so
// the run's sales mix both.
type StrategySwitch struct {
	target *Target
}

// Name implements Fault.
func (*StrategySwitch) Name() string { return "strategy-switch" }

// ChangesDefault implements DefaultChanger.
func (*StrategySwitch) ChangesDefault() bool { return true }

// AppliesTo implements Applicable: there must be another strategy of the
// same kind to switch to.
func (*StrategySwitch) AppliesTo(t Target) error {
	if otherOfKind(t.Strategies, t.Strategy) == "" {
		return fmt.Errorf("no other strategy of %s's kind (safe or unsafe) to switch to: %w", t.Strategy, ErrNotApplicable)
	}
	return nil
}

// Inject implements Fault.
func (f *StrategySwitch) Inject(ctx context.Context, t Target) error {
	if err := f.AppliesTo(t); err != nil {
		return err
	}
	other := otherOfKind(t.Strategies, t.Strategy)
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	if err := setDefault(ctx, t, other); err != nil {
		return err
	}
	f.target = &t
	return nil
}

// Heal implements Fault.
func (f *StrategySwitch) Heal(ctx context.Context) error {
	if f.target == nil {
		return nil
	}
	t := *f.target
	f.target = nil
	return setDefault(ctx, t, t.Strategy)
}

// otherOfKind returns the strategy after name in all that is as safe as
// name, wrapping round, or "" when there is none.
func otherOfKind(all []Strategy, name string) string {
	i := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == name })
	if i < 0 {
		return ""
	}
	for k := 1; k < len(all); k++ {
		if s := all[(i+k)%len(all)]; s.Safe == all[i].Safe {
			return s.Name
		}
	}
	return ""
}

// setDefault switches the fleet default to name and waits until GET
// /strategy through nginx has answered it four times in a row (both
// replicas, twice, have dropped their cached default).
func setDefault(ctx context.Context, t Target, name string) error {
	c := t.Fleet.Client()
	if err := c.SetStrategy(ctx, name); err != nil {
		return fmt.Errorf("switch the fleet default to %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for inARow := 0; inARow < 4; {
		got, err := c.Strategy(ctx)
		if err != nil {
			return fmt.Errorf("after switching the fleet default to %s: %w", name, err)
		}
		if got == name {
			inARow++
			continue
		}
		inARow = 0
		select {
		case <-ctx.Done():
			return fmt.Errorf("the fleet default is still %s 10s after switching it to %s", got, name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
