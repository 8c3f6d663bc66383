package cpuprof

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FindFleet finds, under proc ("/proc"), the fleet that process parent
// started and still runs (`make fleet`'s bin/fleet, whose pid its state
// file names): its child named postgres (the postmaster), its children
// named inventory (each replica's name and address read from its
// environment, INVENTORY_INSTANCE and INVENTORY_ADDR, with its other
// settings), and its
// redis-server started with --port redisPort. url and adminToken are
// the fleet's, as its state file gives them.
//
// A fleet whose Postgres runs under Patroni has no postmaster of its own
// among parent's children, and is refused.
func FindFleet(proc string, parent int, url, adminToken, redisPort string) (Fleet, error) {
	t, err := ReadTable(proc)
	if err != nil {
		return Fleet{}, err
	}
	if _, ok := t[parent]; !ok {
		return Fleet{}, fmt.Errorf("find the fleet: its process %d is not running", parent)
	}
	f := Fleet{URL: url, AdminToken: adminToken, Parent: parent}
	var postmasters, redises []int
	for _, pid := range t.children()[parent] {
		switch t[pid].Comm {
		case "postgres":
			postmasters = append(postmasters, pid)
		case "inventory":
			env, err := readNul(proc, pid, "environ")
			if err != nil {
				return Fleet{}, fmt.Errorf("find the fleet's replicas: %w", err)
			}
			r := Replica{Name: value(env, "INVENTORY_INSTANCE"), Pid: pid}
			if addr := value(env, "INVENTORY_ADDR"); addr != "" {
				r.URL = "http://" + addr
			}
			if r.Name == "" || r.URL == "" {
				return Fleet{}, fmt.Errorf("find the fleet's replicas: process %d has no INVENTORY_INSTANCE or INVENTORY_ADDR", pid)
			}
			r.Settings = map[string]string{}
			for _, kv := range env {
				if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "INVENTORY_") && k != "INVENTORY_ADMIN_TOKEN" {
					r.Settings[k] = v
				}
			}
			f.Replicas = append(f.Replicas, r)
		case "redis-server":
			args, err := readNul(proc, pid, "cmdline")
			if err != nil {
				return Fleet{}, fmt.Errorf("find the fleet's Redis: %w", err)
			}
			if listensOn(args, redisPort) {
				redises = append(redises, pid)
			}
		}
	}
	switch {
	case len(postmasters) != 1:
		return Fleet{}, fmt.Errorf("find the fleet: process %d has %d children named postgres, want its one postmaster (a Postgres under Patroni is not measured)", parent, len(postmasters))
	case len(redises) != 1:
		return Fleet{}, fmt.Errorf("find the fleet: process %d has %d redis-server children on port %s, want one", parent, len(redises), redisPort)
	case len(f.Replicas) == 0:
		return Fleet{}, fmt.Errorf("find the fleet: process %d has no inventory replica", parent)
	}
	f.Postgres, f.Redis = postmasters[0], redises[0]
	slices.SortFunc(f.Replicas, func(a, b Replica) int { return strings.Compare(a.Name, b.Name) })
	return f, nil
}

// listensOn reports whether a redis-server's command line names port:
// as started (--port PORT) or as it retitles itself once running
// ("redis-server 127.0.0.1:PORT", its whole command line).
func listensOn(cmdline []string, port string) bool {
	words := strings.Fields(strings.Join(cmdline, " "))
	for i, w := range words {
		if w == "--port" && i+1 < len(words) && words[i+1] == port || strings.HasSuffix(w, ":"+port) {
			return true
		}
	}
	return false
}

// readNul reads /proc/PID/NAME, a list of NUL-terminated strings
// (environ, cmdline).
func readNul(proc string, pid int, name string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, part := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(part))
	}
	return out, nil
}

// value is KEY's value in an environment's KEY=VALUE list; "" if absent.
func value(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
