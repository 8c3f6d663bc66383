package cpuprof

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statLine is a /proc/PID/stat line as Linux writes it, with the given
// name, state, parent and times; the other fields as a real one has them.
func statLine(pid int, comm string, state byte, ppid int, utime, stime, cutime, cstime int64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 1234 0 0 0 %d %d %d %d 20 0 1 0 5678 12345678 456 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
		pid, comm, state, ppid, pid, pid, utime, stime, cutime, cstime)
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Stat
	}{
		{statLine(812, "postgres", 'S', 1, 150, 40, 3000, 700),
			Stat{Pid: 812, Comm: "postgres", State: 'S', PPid: 1, Utime: 150, Stime: 40, CUtime: 3000, CStime: 700}},
		// A name may hold spaces and parentheses: it ends at the last ")".
		{statLine(9, "a) b (c", 'R', 2, 1, 2, 3, 4),
			Stat{Pid: 9, Comm: "a) b (c", State: 'R', PPid: 2, Utime: 1, Stime: 2, CUtime: 3, CStime: 4}},
		{statLine(10, "nginx: worker", 'S', 9, 7, 8, 0, 0),
			Stat{Pid: 10, Comm: "nginx: worker", State: 'S', PPid: 9, Utime: 7, Stime: 8}},
		{statLine(11, ")", 'Z', 10, 5, 6, 0, 0), // a zombie keeps its times
			Stat{Pid: 11, Comm: ")", State: 'Z', PPid: 10, Utime: 5, Stime: 6}},
		{statLine(12, "", 'S', 0, 0, 0, 0, 0) + "\n", Stat{Pid: 12, State: 'S'}},
	} {
		got, err := ParseStat([]byte(tc.line))
		if err != nil || got != tc.want {
			t.Errorf("ParseStat(%.40q…) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

func TestParseStatRefusesWhatIsNotAStatLine(t *testing.T) {
	for _, line := range []string{
		"",
		"812 postgres S 1", // no parentheses
		"(postgres) S 1 " + strings.Repeat("0 ", 20), // no pid
		"x (postgres) S 1 " + strings.Repeat("0 ", 20),
		"-3 (postgres) S 1 " + strings.Repeat("0 ", 20),
		"812 (postgres S 1 " + strings.Repeat("0 ", 20), // no closing parenthesis
		"812 (postgres) S 1 2 3",                        // too few fields
		"812 (postgres) SS 1 " + strings.Repeat("0 ", 20),
		"812 (postgres) S x " + strings.Repeat("0 ", 20),
		statLine(812, "postgres", 'S', 1, 1, 2, -1, 4), // a negative cutime must not wrap
		strings.Replace(statLine(812, "postgres", 'S', 1, 1, 2, 3, 4), " 1 2 3 4 ", " 1 x 3 4 ", 1),
	} {
		if s, err := ParseStat([]byte(line)); !errors.Is(err, errStat) {
			t.Errorf("ParseStat(%.60q) = %+v, %v; want an error wrapping errStat", line, s, err)
		}
	}
}

// writeProc writes a fake /proc: one PID/stat per line, and self/stat.
func writeProc(t *testing.T, self string, lines ...string) string {
	t.Helper()
	root := t.TempDir()
	write := func(dir, line string) {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "stat"), []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range lines {
		s, err := ParseStat([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprint(s.Pid), l)
	}
	write("self", self)
	write("sys", "not a process") // /proc's other entries are not read
	if err := os.WriteFile(filepath.Join(root, "uptime"), []byte("1 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestReadTable(t *testing.T) {
	root := writeProc(t, statLine(100, "loadtest", 'S', 1, 1, 1, 0, 0),
		statLine(100, "loadtest", 'S', 1, 1, 1, 0, 0),
		statLine(200, "postgres", 'S', 100, 10, 5, 30, 10),
		statLine(201, "postgres", 'S', 200, 3, 1, 0, 0))
	tab, err := ReadTable(root)
	if err != nil {
		t.Fatalf("ReadTable = %v", err)
	}
	if len(tab) != 3 || tab[201].PPid != 200 || tab[200].CUtime != 30 {
		t.Errorf("ReadTable = %+v, want processes 100, 200, 201 as written", tab)
	}
	self, err := ReadSelf(root)
	if err != nil || self.Pid != 100 {
		t.Errorf("ReadSelf = %+v, %v; want pid 100", self, err)
	}
	if err := os.WriteFile(filepath.Join(root, "201", "stat"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTable(root); !errors.Is(err, errStat) || !strings.Contains(err.Error(), "201") {
		t.Errorf("ReadTable with a malformed stat = %v, want an error naming process 201", err)
	}
	if _, err := ReadTable(filepath.Join(root, "nowhere")); err == nil {
		t.Error("ReadTable of a missing directory = nil error")
	}
}

// table is a Table of stat lines.
func table(t *testing.T, lines ...string) Table {
	t.Helper()
	tab := Table{}
	for _, l := range lines {
		s, err := ParseStat([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		tab[s.Pid] = s
	}
	return tab
}

func TestTreeTicksCountsDescendantsAndTheChildrenTheyReaped(t *testing.T) {
	tab := table(t,
		statLine(200, "postgres", 'S', 100, 10, 5, 30, 10), // 15 own + 40 reaped
		statLine(201, "postgres", 'S', 200, 3, 1, 0, 0),    // a backend: 4
		statLine(202, "postgres", 'Z', 200, 2, 2, 0, 0),    // exited, not yet waited for: 4
		statLine(203, "postgres", 'S', 201, 1, 0, 5, 0),    // a grandchild: 1 + 5
		statLine(300, "redis-server", 'S', 100, 50, 50, 0, 0),
	)
	if got, ok := tab.TreeTicks(200); !ok || got != 15+40+4+4+6 {
		t.Errorf("TreeTicks(postmaster) = %d, %v; want %d", got, ok, 15+40+4+4+6)
	}
	if got, ok := tab.TreeTicks(201); !ok || got != 4+6 {
		t.Errorf("TreeTicks(backend) = %d, %v; want 10", got, ok)
	}
	if got, ok := tab.TreeTicks(999); ok || got != 0 {
		t.Errorf("TreeTicks(missing) = %d, %v; want 0, false", got, ok)
	}
}

// fleetTable is a fleet as the load tester starts it: everything a child
// of pid 100 (the load tester itself).
func fleetTable(t *testing.T, backend int64, backendAlive bool, postmasterReaped int64) Table {
	lines := []string{
		statLine(100, "loadtest", 'S', 1, 500, 100, 9000, 0), // its reaped children (a go build) are not load
		statLine(200, "postgres", 'S', 100, 10, 5, postmasterReaped, 0),
		statLine(300, "redis-server", 'S', 100, 7, 3, 0, 0),
		statLine(400, "inventory", 'S', 100, 80, 20, 0, 0),
		statLine(401, "inventory", 'S', 100, 60, 40, 0, 0),
		statLine(500, "nginx", 'S', 100, 1, 1, 0, 0),
		statLine(501, "nginx", 'S', 500, 30, 20, 0, 0),
		statLine(600, "etcd", 'S', 100, 4, 1, 0, 0),
		statLine(601, "java", 'S', 100, 9, 1, 0, 0),
		statLine(700, "bash", 'S', 1, 1000, 0, 0, 0), // not the fleet's
	}
	if backendAlive {
		lines = append(lines, statLine(201, "postgres", 'S', 200, backend, 0, 0, 0))
	}
	return table(t, lines...)
}

var testFleet = Fleet{Postgres: 200, Redis: 300, Parent: 100,
	Replicas: []Replica{{Name: "inventory-1", Pid: 400}, {Name: "inventory-2", Pid: 401}}}

func TestSampleGroupsTheFleet(t *testing.T) {
	tab := fleetTable(t, 25, true, 0)
	s, err := testFleet.Sample(tab, tab[100])
	if err != nil {
		t.Fatalf("Sample = %v", err)
	}
	want := Sample{
		GroupPostgres: 15 + 25, GroupRedis: 10, "inventory-1": 100, "inventory-2": 100, GroupReplicas: 200,
		GroupNginx: 52, GroupOther: 5 + 10, GroupGenerator: 600,
		GroupFleet: 40 + 10 + 200 + 52 + 15,
	}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("Sample =\n%v\nwant\n%v", s, want)
	}
	without := Fleet{Postgres: 200, Redis: 300, Replicas: testFleet.Replicas} // no Parent: no nginx, no other servers
	if s, err := without.Sample(tab, tab[100]); err != nil || s[GroupNginx] != 0 || s[GroupOther] != 0 || s[GroupFleet] != 40+10+200 {
		t.Errorf("Sample without Parent = %v, %v; want no nginx nor other servers", s, err)
	}
	gone := testFleet
	gone.Replicas = append(gone.Replicas, Replica{Name: "inventory-3", Pid: 402})
	if _, err := gone.Sample(tab, tab[100]); err == nil || !strings.Contains(err.Error(), "inventory-3") {
		t.Errorf("Sample with a replica not running = %v, want an error naming it", err)
	}
}

// TestUsedCountsABackendThatExitedInTheWindow: a backend that ran 25
// ticks before the window and exits in it at 40 is waited for by the
// postmaster: its 15 ticks in the window must count, through the
// postmaster's cutime, neither lost nor counted twice.
func TestUsedCountsABackendThatExitedInTheWindow(t *testing.T) {
	before := fleetTable(t, 25, true, 0)
	after := fleetTable(t, 0, false, 40)
	after[400] = Stat{Pid: 400, Comm: "inventory", PPid: 100, Utime: 130, Stime: 20} // 50 more
	a, err := testFleet.Sample(before, before[100])
	if err != nil {
		t.Fatal(err)
	}
	b, err := testFleet.Sample(after, after[100])
	if err != nil {
		t.Fatal(err)
	}
	used, err := Used(a, b)
	if err != nil {
		t.Fatalf("Used = %v", err)
	}
	if used[GroupPostgres] != 15 || used["inventory-1"] != 50 || used[GroupReplicas] != 50 || used[GroupFleet] != 65 || used[GroupNginx] != 0 {
		t.Errorf("Used = %v, want postgres 15, inventory-1 and replicas 50, fleet 65, nginx 0", used)
	}
	// A backend that exits with nobody waiting for it (its parent gone
	// too) takes its CPU along: the group's figure would be a guess.
	if _, err := Used(b, a); err == nil {
		t.Error("Used with a group's CPU going down = nil error")
	}
}
