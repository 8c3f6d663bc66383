package productcache

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
)

// The keys of a product's cached read. The hash tag {id} puts them in the
// slot of the product's other keys (internal/redis), so each script below
// touches one Redis Cluster slot.

// entryKey holds the product's read: "product:{sku-1}".
func entryKey(id string) string { return "product:{" + id + "}" }

// floorKey holds the newest round a restock dropped (drop.lua).
func floorKey(id string) string { return entryKey(id) + ":round" }

// refreshKey names the product's refresh lock.
func refreshKey(id string) string { return entryKey(id) + ":refresh" }

// floorLife is how long a restock's round floor lasts: longer than any
// refresh that read Postgres before the restock can still be running (a
// lookup is bounded by flightTimeout).
const floorLife = time.Minute

var (
	//go:embed fetch.lua
	fetchSrc string
	//go:embed store.lua
	storeSrc string
	//go:embed drop.lua
	dropSrc string

	fetchScript = redis.NewScript(fetchSrc)
	storeScript = redis.NewScript(storeSrc)
	dropScript  = redis.NewScript(dropSrc)
)

// entry is a cached read as it is stored: the product, or that there is
// none, and the life it was written with (the writer's TTL), from which a
// reader tells its age. The product is stored whole (inventory.Product's
// own fields), so a field added to it is cached too.
type entry struct {
	// LifeMS is the writer's TTL in ms: the entry's age is LifeMS less its
	// remaining PX, since it was written with PX = LifeMS less the time
	// its Postgres read had taken by then.
	LifeMS  int64              `json:"life_ms"`
	Missing bool               `json:"missing,omitempty"`
	Product *inventory.Product `json:"product,omitempty"`
}

// cached is an entry as a reader found it.
type cached struct {
	product inventory.Product
	missing bool
	age     time.Duration
}

// errBadEntry: what Redis holds under an entry's key is not an entry (a
// format of another version, or a stray write); it is read as a miss.
var errBadEntry = errors.New("not a product cache entry")

// fetch reads id's entry and its age: found false when there is none.
func fetch(ctx context.Context, rdb redis.Scripter, id string) (c cached, found bool, err error) {
	v, err := fetchScript.Run(ctx, rdb, []string{entryKey(id)}).Result()
	if errors.Is(err, redis.Nil) {
		return cached{}, false, nil
	}
	if err != nil {
		return cached{}, false, fmt.Errorf("redis: fetch %s: %w", entryKey(id), err)
	}
	reply, ok := v.([]any)
	if !ok || len(reply) != 2 {
		return cached{}, false, fmt.Errorf("redis: fetch %s: %w: reply %v", entryKey(id), errBadEntry, v)
	}
	raw, _ := reply[0].(string)
	pttl, _ := reply[1].(int64)
	var e entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil || e.LifeMS <= 0 || (e.Product == nil) == !e.Missing {
		return cached{}, false, fmt.Errorf("redis: fetch %s: %w: %.100q", entryKey(id), errBadEntry, raw)
	}
	if pttl < 0 {
		// -2: expired between GET and PTTL (not in one script); -1: written
		// without a life, by no version of this package.
		return cached{}, false, nil
	}
	c = cached{missing: e.Missing, age: time.Duration(max(0, e.LifeMS-pttl)) * time.Millisecond}
	if e.Product != nil {
		c.product = *e.Product
	}
	return c, true, nil
}

// store writes id's entry for a read that began at readAt (p, or missing),
// with life ttl less the time since readAt; an entry that would be born
// dead is not written. It writes nothing for a round a restock has
// dropped.
func store(ctx context.Context, rdb redis.Scripter, id string, p inventory.Product, missing bool, readAt time.Time, ttl time.Duration) error {
	px := (ttl - time.Since(readAt)).Milliseconds()
	if px <= 0 {
		return nil
	}
	e := entry{LifeMS: ttl.Milliseconds(), Missing: missing}
	round := 0
	if !missing {
		e.Product, round = &p, p.Round
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s: %w", entryKey(id), err)
	}
	if err := storeScript.Run(ctx, rdb, []string{entryKey(id), floorKey(id)}, b, px, round).Err(); err != nil {
		return fmt.Errorf("redis: store %s: %w", entryKey(id), err)
	}
	return nil
}

// drop deletes id's entry and forbids entries of rounds before round.
func drop(ctx context.Context, rdb redis.Scripter, id string, round int) error {
	if err := dropScript.Run(ctx, rdb, []string{entryKey(id), floorKey(id)}, round, floorLife.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("redis: drop %s: %w", entryKey(id), err)
	}
	return nil
}
