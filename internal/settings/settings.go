// Package settings keeps fleet-wide settings in Redis, so that every replica
// follows a change within a second.
package settings

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// StrategyKey is the Redis key holding the fleet's default strategy.
const StrategyKey = "inventory:strategy"

// DefaultRefresh is how long a replica trusts its cached copy of the default.
const DefaultRefresh = 500 * time.Millisecond

// Strategy is the fleet-wide default sale strategy.
type Strategy struct {
	rdb      redis.UniversalClient
	validate func(string) error
	refresh  time.Duration

	mu      sync.Mutex
	cached  string
	fetched time.Time
}

// NewStrategy returns the fleet default stored in rdb. validate rejects
// unknown names; refresh bounds how stale a replica's view may be (0 means
// DefaultRefresh).
func NewStrategy(rdb redis.UniversalClient, validate func(string) error, refresh time.Duration) *Strategy {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return &Strategy{rdb: rdb, validate: validate, refresh: refresh}
}

// Init stores initial as the fleet default unless one is stored already,
// so a replica that starts later does not overwrite a switch made since.
func (s *Strategy) Init(ctx context.Context, initial string) error {
	if err := s.validate(initial); err != nil {
		return err
	}
	if err := s.rdb.SetNX(ctx, StrategyKey, initial, 0).Err(); err != nil {
		return fmt.Errorf("store default strategy: %w", err)
	}
	return nil
}

// Get returns the fleet default, at most the refresh interval old. When Redis
// cannot be read it keeps serving the last value it saw and reports the error
// alongside; with no value seen yet it returns "" and the error.
func (s *Strategy) Get(ctx context.Context) (string, error) {
	s.mu.Lock()
	cached, fresh := s.cached, time.Since(s.fetched) < s.refresh
	s.mu.Unlock()
	if fresh && cached != "" {
		return cached, nil
	}
	name, err := s.rdb.Get(ctx, StrategyKey).Result()
	if err == nil && s.validate(name) != nil {
		err = fmt.Errorf("stored default strategy is invalid: %w", s.validate(name))
	}
	if err != nil {
		return cached, fmt.Errorf("read default strategy: %w", err)
	}
	s.mu.Lock()
	s.cached, s.fetched = name, time.Now()
	s.mu.Unlock()
	return name, nil
}

// Set makes name the fleet default for every replica.
func (s *Strategy) Set(ctx context.Context, name string) error {
	if err := s.validate(name); err != nil {
		return err
	}
	if err := s.rdb.Set(ctx, StrategyKey, name, 0).Err(); err != nil {
		return fmt.Errorf("store default strategy: %w", err)
	}
	s.mu.Lock()
	s.cached, s.fetched = name, time.Now()
	s.mu.Unlock()
	return nil
}
