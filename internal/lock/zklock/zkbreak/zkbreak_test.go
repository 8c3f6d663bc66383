package zkbreak

import (
	"fmt"
	"testing"

	"inventory/internal/lock/zklock"
)

// TestLayoutAgreesWithTheBackend holds the layout the breaker reads
// (written down here so that the fault harness compiles no lock backend)
// against zklock's own: a backend that renames its nodes fails here, and
// faults' TestLockExpiredEarlyDeletesHoldersKeys then finds and strikes
// what real lockers wrote.
func TestLayoutAgreesWithTheBackend(t *testing.T) {
	if Root != zklock.DefaultRoot {
		t.Errorf("Root = %q, want zklock.DefaultRoot %q", Root, zklock.DefaultRoot)
	}
	if Setting != zklock.Setting {
		t.Errorf("Setting = %q, want zklock.Setting %q", Setting, zklock.Setting)
	}
	node := func(guid string, seq int) string { return fmt.Sprintf("%s%s-lock-%010d", protected, guid, seq) }
	for _, children := range [][]string{
		nil,
		{},
		{"not-a-lock-node"},
		{node("a1", 7)},
		{node("a1", 7), node("b2", 3), node("c3", 12)},
		{"_c_short", node("b2", 3), "lock-0000000001"},
		{node("b2", 10), node("a1", 9)},
		{node("a1", 0), "x" + node("b2", 0)[1:]},
		{"_c_guid-lock-00000000x1", node("d4", 2)},
	} {
		got, gotOK := Holder(children)
		want, wantOK := zklock.Holder(children)
		if got != want || gotOK != wantOK {
			t.Errorf("Holder(%q) = %q, %v; zklock.Holder = %q, %v", children, got, gotOK, want, wantOK)
		}
	}
}
