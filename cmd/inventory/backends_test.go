package main

import (
	"slices"
	"testing"

	"inventory/internal/lock/backend"
	"inventory/internal/stock"
)

// TestOneListOfLockBackends: the list names each backend once, no two
// backends share a fencing counter (their tokens would be compared), a
// backend with a setting checks it, and every lock strategy takes its
// lock from a backend of the list whose setting is the one the strategy
// says it needs.
func TestOneListOfLockBackends(t *testing.T) {
	byName := map[string]backend.Descriptor{}
	counters := map[string]string{}
	for _, d := range lockBackends {
		if _, dup := byName[d.Name]; dup || d.Name == "" || d.Open == nil {
			t.Errorf("backend %q: named twice, unnamed or without Open", d.Name)
		}
		byName[d.Name] = d
		if d.Setting != "" && d.Check == nil {
			t.Errorf("backend %s: setting %s has no Check", d.Name, d.Setting)
		}
		if len(d.Fences) == 0 {
			t.Errorf("backend %s names no fencing counter", d.Name)
		}
		for _, c := range d.Fences {
			if other, dup := counters[c]; dup {
				t.Errorf("fencing counter %q is both %s's and %s's", c, other, d.Name)
			}
			counters[c] = d.Name
		}
	}
	for _, info := range stock.Strategies {
		if info.Lock == "" {
			continue
		}
		d, ok := byName[info.LockBackend()]
		if !ok {
			t.Errorf("strategy %s takes its lock from %q, a backend not in the list", info.Name, info.Lock)
			continue
		}
		if info.Needs != d.Setting {
			t.Errorf("strategy %s needs %q, but its backend %s's setting is %q", info.Name, info.Needs, d.Name, d.Setting)
		}
	}
	if !slices.ContainsFunc(stock.Strategies, func(i stock.Info) bool { return i.Lock != "" }) {
		t.Fatal("no strategy takes a lock of a backend")
	}
}
