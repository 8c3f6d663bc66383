package faults

import (
	"fmt"
	"testing"

	"inventory/internal/lock/etcdlock"
	"inventory/internal/lock/zklock"
)

// TestLockLayoutAgreesWithTheBackends holds the layout lock-expired-early
// reads (written down in the fault so that the load tester compiles no lock
// backend) against the backends' own: a backend that moves its keys or
// renames its nodes fails here. TestLockExpiredEarlyDeletesHoldersKeys then
// finds and strikes what real lockers wrote.
func TestLockLayoutAgreesWithTheBackends(t *testing.T) {
	if etcdLockPrefix != etcdlock.DefaultPrefix {
		t.Errorf("etcdLockPrefix = %q, want etcdlock.DefaultPrefix %q", etcdLockPrefix, etcdlock.DefaultPrefix)
	}
	if zkLockRoot != zklock.DefaultRoot {
		t.Errorf("zkLockRoot = %q, want zklock.DefaultRoot %q", zkLockRoot, zklock.DefaultRoot)
	}
	node := func(guid string, seq int) string { return fmt.Sprintf("%s%s-lock-%010d", zkProtected, guid, seq) }
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
		got, gotOK := zkHolder(children)
		want, wantOK := zklock.Holder(children)
		if got != want || gotOK != wantOK {
			t.Errorf("zkHolder(%q) = %q, %v; zklock.Holder = %q, %v", children, got, gotOK, want, wantOK)
		}
	}
}
