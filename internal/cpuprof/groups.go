package cpuprof

import (
	"fmt"
	"slices"
)

// The groups a measurement reads the CPU of. Each replica is also a group
// of its own, under its name.
const (
	GroupPostgres  = "postgres"  // the postmaster and every backend and worker under it
	GroupReplicas  = "replicas"  // every replica
	GroupNginx     = "nginx"     // the master and its workers
	GroupRedis     = "redis"     // the fleet's Redis (locks, counters, announcements)
	GroupOther     = "other"     // the fleet's other servers: the lock backends' (etcd, ZooKeeper, Redlock's Redis servers)
	GroupFleet     = "fleet"     // all of the above: every process but the load generator
	GroupGenerator = "generator" // the load generator: the measuring process itself
)

// Fleet is what a measurement drives and reads: nginx's URL, and the
// fleet's processes by pid. Each pid counts with every process under it.
type Fleet struct {
	// URL is nginx's base URL, where the clients send.
	URL string
	// AdminToken is the replicas' admin token: a sale names its strategy
	// (?strategy=) and a product is restocked with it.
	AdminToken string
	// Postgres is the postmaster's pid, Redis the Redis server's.
	Postgres, Redis int
	// Replicas are the inventory processes.
	Replicas []Replica
	// Parent is the process that started the fleet: its children other
	// than the ones above are nginx (by its name) and the fleet's other
	// servers. 0: none are counted.
	Parent int
}

// Replica is one inventory process of a Fleet.
type Replica struct {
	// Name is its instance name ("inventory-1"): a group of its own.
	Name string
	// URL is its own address, past nginx, for its CPU profile.
	URL string
	Pid int
	// Settings are its INVENTORY_* settings other than the admin token,
	// when FindFleet read them from its environment; else nil.
	Settings map[string]string
}

// Sample is each group's CPU at one moment, in ticks.
type Sample map[string]uint64

// Sample reads each group's CPU from t, and the generator's from self
// (its own threads only: the children it waited for, such as a build,
// are not load).
func (f Fleet) Sample(t Table, self Stat) (Sample, error) {
	kids := t.children()
	s := Sample{GroupGenerator: self.Own()}
	tree := func(group string, pid int) error {
		ticks, ok := t.treeTicks(pid, kids)
		if !ok {
			return fmt.Errorf("%s (pid %d) is not running", group, pid)
		}
		s[group] += ticks
		return nil
	}
	if err := tree(GroupPostgres, f.Postgres); err != nil {
		return nil, err
	}
	if err := tree(GroupRedis, f.Redis); err != nil {
		return nil, err
	}
	known := []int{f.Postgres, f.Redis, self.Pid}
	for _, r := range f.Replicas {
		if err := tree(r.Name, r.Pid); err != nil {
			return nil, err
		}
		s[GroupReplicas] += s[r.Name]
		known = append(known, r.Pid)
	}
	if f.Parent > 0 {
		for _, pid := range kids[f.Parent] {
			if slices.Contains(known, pid) {
				continue
			}
			group := GroupOther
			if t[pid].Comm == "nginx" {
				group = GroupNginx
			}
			ticks, _ := t.treeTicks(pid, kids)
			s[group] += ticks
		}
	}
	s[GroupFleet] = s[GroupPostgres] + s[GroupReplicas] + s[GroupNginx] + s[GroupRedis] + s[GroupOther]
	return s, nil
}

// Used is the CPU each group used from before to after, in ticks. A group
// whose CPU went down lost a process that nobody in it waited for (a
// server restarted during the window): its figure would be a guess, so
// that is an error.
func Used(before, after Sample) (map[string]uint64, error) {
	out := map[string]uint64{}
	for g, a := range after {
		b := before[g]
		if a < b {
			return nil, fmt.Errorf("the CPU of %s went down from %d to %d ticks: one of its processes ended during the window", g, b, a)
		}
		out[g] = a - b
	}
	return out, nil
}
