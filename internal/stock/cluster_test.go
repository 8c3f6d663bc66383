package stock

import (
	"strings"
	"testing"

	"inventory/internal/inventory"
)

// clusterNames are the strategies whose state is in the fleet's Redis:
// with INVENTORY_REDIS_CLUSTER they run on a Redis Cluster. (redlock keeps
// servers of its own, independent of one another.)
var clusterNames = []string{inventory.SetNX, inventory.RedisLock, inventory.Reentrant, inventory.Fair, inventory.Lua, inventory.Handoff}

// clusterSafe are the safe ones of clusterNames, and atomic, which keeps
// nothing in Redis, to mix them with.
func clusterSafe() []string {
	var names []string
	for _, name := range clusterNames {
		if info, _ := inventory.Lookup(name); info.Safe {
			names = append(names, name)
		}
	}
	return append(names, inventory.Atomic)
}

// TestContractOnCluster runs the contract against each Redis strategy on a
// Redis Cluster: every script's keys must be in one slot (one {id} tag),
// and every key a script touches named in KEYS. Afterwards every key in
// the cluster belongs to a product by its hash tag.
func TestContractOnCluster(t *testing.T) {
	for _, name := range clusterNames {
		t.Run(name, func(t *testing.T) {
			e := newClusterEnv(t)
			contract(t, e, name)
			for _, k := range e.redisKeys(t) {
				if !productTagged(k) {
					t.Errorf("after the contract cases, %s left key %q, which has no product's {id} tag", name, k)
				}
			}
		})
	}
}

// productTagged reports whether key is hashed by a product id in braces.
func productTagged(key string) bool {
	open := strings.IndexByte(key, '{')
	end := strings.IndexByte(key[open+1:], '}')
	return open >= 0 && end > 0
}

// TestOrderedPairsOnCluster sells every ordered pair of the safe Redis
// strategies (and atomic) on a Redis Cluster, as
// TestOrderedPairsOfSafeStrategies does on one Redis.
func TestOrderedPairsOnCluster(t *testing.T) {
	names := clusterSafe()
	var pairs [][2]string
	for _, a := range names {
		for _, b := range names {
			if a != b {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	sellPairs(t, newClusterEnv(t), pairs)
}

// TestAllAtOnceOnCluster is TestAllSafeStrategiesAtOnce for the safe Redis
// strategies (and atomic) on a Redis Cluster.
func TestAllAtOnceOnCluster(t *testing.T) { allAtOnce(t, newClusterEnv(t), clusterSafe()) }

// TestRestockDuringSalesOnCluster is TestRestockDuringSales's mixed case
// for the safe Redis strategies (and atomic) on a Redis Cluster: each of
// them alone would add seconds (a lock strategy's 300 buyers, one at a
// time) and nothing the mix does not try.
func TestRestockDuringSalesOnCluster(t *testing.T) {
	restockDuringSales(t, newClusterEnv(t), [][]string{clusterSafe()})
}
