// Package redlockbreak is redlock's Breaker (package breaker): it finds a
// product's lock on the Redlock servers (INVENTORY_REDLOCK_URLS) and
// deletes it under its holder on every server that has it.
package redlockbreak

import (
	"context"
	"strings"

	"inventory/internal/lock/breaker"
	"inventory/internal/lock/redislock/redisbreak"
)

// Setting is redlock's (redlock.Setting).
const Setting = "INVENTORY_REDLOCK_URLS"

// Breaker is redlock's.
var Breaker = breaker.Breaker{
	Backend: "redlock",
	Where:   "the Redlock servers",
	Open: func(_ context.Context, s breaker.Servers) (breaker.Locks, bool, error) {
		urls := s.Settings[Setting]
		if urls == "" {
			return nil, false, nil
		}
		var l redisbreak.Locks
		for u := range strings.SplitSeq(urls, ",") {
			rdb, err := redisbreak.Client(u)
			if err != nil {
				l.Close()
				return nil, false, err
			}
			l = append(l, rdb)
		}
		return l, true, nil
	},
}
