package faults

import (
	"fmt"
	"testing"

	"inventory/internal/lock/etcdlock"
	"inventory/internal/lock/etcdlock/etcdbreak"
	"inventory/internal/lock/redlock"
	"inventory/internal/lock/redlock/redlockbreak"
	"inventory/internal/lock/zklock"
	"inventory/internal/lock/zklock/zkbreak"
)

// TestLockLayoutAgreesWithTheBackends holds the layout the backends'
// breakers read (written down in each breaker so that the load tester
// compiles no lock backend) against the backends' own: a backend that
// moves its keys, renames its nodes or reads another setting fails here.
// TestLockExpiredEarlyDeletesHoldersKeys then finds and strikes what real
// lockers wrote.
func TestLockLayoutAgreesWithTheBackends(t *testing.T) {
	if etcdbreak.Prefix != etcdlock.DefaultPrefix {
		t.Errorf("etcdbreak.Prefix = %q, want etcdlock.DefaultPrefix %q", etcdbreak.Prefix, etcdlock.DefaultPrefix)
	}
	if zkbreak.Root != zklock.DefaultRoot {
		t.Errorf("zkbreak.Root = %q, want zklock.DefaultRoot %q", zkbreak.Root, zklock.DefaultRoot)
	}
	for _, s := range [][2]string{{etcdbreak.Setting, etcdlock.Setting}, {zkbreak.Setting, zklock.Setting}, {redlockbreak.Setting, redlock.Setting}} {
		if s[0] != s[1] {
			t.Errorf("a breaker finds its servers by %s, its backend's setting is %s", s[0], s[1])
		}
	}
	node := func(guid string, seq int) string { return fmt.Sprintf("_c_%s-lock-%010d", guid, seq) }
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
		got, gotOK := zkbreak.Holder(children)
		want, wantOK := zklock.Holder(children)
		if got != want || gotOK != wantOK {
			t.Errorf("zkbreak.Holder(%q) = %q, %v; zklock.Holder = %q, %v", children, got, gotOK, want, wantOK)
		}
	}
}
