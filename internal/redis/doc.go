// Package redis is the Redis side of selling: the keys a product has in
// Redis, the lua strategy's per-round counter and its scripts, and the
// announcements the replicas send each other (a restock, a sell-out).
// Redis never has the last word: Postgres does (internal/postgres). Every
// failure to get an answer from Redis is translated here, at the edge,
// into inventory.ErrUnavailable.
package redis
