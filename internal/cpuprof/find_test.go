package cpuprof

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeNul writes /proc/PID/NAME of a fake /proc as NUL-terminated parts.
func writeNul(t *testing.T, root string, pid int, name string, parts ...string) {
	t.Helper()
	b := strings.Join(parts, "\x00") + "\x00"
	if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), name), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeFleetProc is `make fleet`'s processes in a fake /proc: bin/fleet
// (pid 50) and its children.
func makeFleetProc(t *testing.T) string {
	root := writeProc(t, statLine(900, "loadtest", 'S', 1, 1, 1, 0, 0),
		statLine(1, "init", 'S', 0, 5, 5, 0, 0),
		statLine(50, "fleet", 'S', 1, 5, 5, 0, 0),
		statLine(200, "postgres", 'S', 50, 10, 5, 30, 10),
		statLine(201, "postgres", 'S', 200, 3, 1, 0, 0), // a backend: not the postmaster
		statLine(300, "redis-server", 'S', 50, 7, 3, 0, 0),
		statLine(310, "redis-server", 'S', 50, 1, 1, 0, 0), // redlock's
		statLine(401, "inventory", 'S', 50, 60, 40, 0, 0),
		statLine(400, "inventory", 'S', 50, 80, 20, 0, 0),
		statLine(500, "nginx", 'S', 50, 1, 1, 0, 0),
		statLine(600, "inventory", 'S', 1, 1, 1, 0, 0), // another fleet's
	)
	// Redis retitles itself once running: its command line is then one
	// string, padded.
	writeNul(t, root, 300, "cmdline", "/usr/bin/redis-server 127.0.0.1:6390           ")
	writeNul(t, root, 310, "cmdline", "redis-server", "--port", "63901")
	writeNul(t, root, 400, "environ", "PATH=/bin", "INVENTORY_INSTANCE=inventory-1", "INVENTORY_ADDR=127.0.0.1:7001",
		"INVENTORY_WORK_DELAY=2ms", "INVENTORY_ADMIN_TOKEN=secret")
	writeNul(t, root, 401, "environ", "INVENTORY_ADDR=127.0.0.1:7002", "INVENTORY_INSTANCE=inventory-2")
	return root
}

func TestListensOn(t *testing.T) {
	for _, tc := range []struct {
		cmdline []string
		port    string
		want    bool
	}{
		{[]string{"redis-server", "--port", "6390", "--bind", "127.0.0.1"}, "6390", true},
		{[]string{"redis-server 127.0.0.1:6390    "}, "6390", true},
		{[]string{"redis-server *:6390"}, "6390", true},
		{[]string{"redis-server", "--port", "63901"}, "6390", false},
		{[]string{"redis-server 127.0.0.1:16390"}, "6390", false},
		{[]string{"redis-server", "--port"}, "6390", false},
		{nil, "6390", false},
	} {
		if got := listensOn(tc.cmdline, tc.port); got != tc.want {
			t.Errorf("listensOn(%q, %s) = %v, want %v", tc.cmdline, tc.port, got, tc.want)
		}
	}
}

func TestFindFleet(t *testing.T) {
	root := makeFleetProc(t)
	f, err := FindFleet(root, 50, "http://127.0.0.1:8080", "tok", "6390")
	if err != nil {
		t.Fatalf("FindFleet = %v", err)
	}
	want := Fleet{URL: "http://127.0.0.1:8080", AdminToken: "tok", Postgres: 200, Redis: 300, Parent: 50,
		Replicas: []Replica{{Name: "inventory-1", URL: "http://127.0.0.1:7001", Pid: 400}, {Name: "inventory-2", URL: "http://127.0.0.1:7002", Pid: 401}}}
	if f.URL != want.URL || f.AdminToken != want.AdminToken || f.Postgres != want.Postgres || f.Redis != want.Redis || f.Parent != want.Parent ||
		len(f.Replicas) != 2 || f.Replicas[0].Name != "inventory-1" || f.Replicas[0].URL != want.Replicas[0].URL || f.Replicas[0].Pid != 400 ||
		f.Replicas[1].Name != "inventory-2" || f.Replicas[1].URL != want.Replicas[1].URL || f.Replicas[1].Pid != 401 {
		t.Errorf("FindFleet =\n%+v\nwant\n%+v", f, want)
	}
	if s := f.Replicas[0].Settings; s["INVENTORY_WORK_DELAY"] != "2ms" || s["INVENTORY_INSTANCE"] != "inventory-1" || s["PATH"] != "" || s["INVENTORY_ADMIN_TOKEN"] != "" {
		t.Errorf("FindFleet: inventory-1's settings = %v, want its INVENTORY_* settings but the admin token", s)
	}
	for _, tc := range []struct {
		parent    int
		redisPort string
		why       string
	}{
		{51, "6390", "not running"},
		{50, "6399", "0 redis-server"},
		{50, "639", "0 redis-server"},
		{500, "6390", "0 children named postgres"},
	} {
		if _, err := FindFleet(root, tc.parent, "u", "t", tc.redisPort); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("FindFleet(parent %d, redis port %s) = %v, want an error saying %q", tc.parent, tc.redisPort, err, tc.why)
		}
	}
	writeNul(t, root, 401, "environ", "PATH=/bin")
	if _, err := FindFleet(root, 50, "u", "t", "6390"); err == nil || !strings.Contains(err.Error(), "INVENTORY_INSTANCE") {
		t.Errorf("FindFleet with a replica without its settings = %v, want an error naming them", err)
	}
}
