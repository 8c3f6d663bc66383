package redislock

import (
	"fmt"
	"strings"

	"inventory/internal/lock"
)

// fenceKey names the fencing counter that belongs to key, in the same Redis
// Cluster slot: "lock:{sku-1}" → "lock:{sku-1}:fence". A key without a hash
// tag is hashed whole, so its companion uses the whole key as its tag:
// "lock-a" → "{lock-a}:fence".
func fenceKey(key string) (string, error) { return companion(key, "fence") }

// releaseChannel names the pub/sub channel on which key's releases are
// announced, hash-tagged like fenceKey: "lock:{sku-1}" → "lock:{sku-1}:released".
func releaseChannel(key string) (string, error) { return companion(key, "released") }

// companion names key+":"+suffix in key's Redis Cluster slot.
func companion(key, suffix string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty", lock.ErrInvalidKey)
	}
	if hasHashTag(key) {
		return key + ":" + suffix, nil
	}
	if strings.Contains(key, "}") {
		return "", fmt.Errorf("%w: %q has no hash tag and contains '}' (use a tag: \"lock:{id}\")", lock.ErrInvalidKey, key)
	}
	return "{" + key + "}:" + suffix, nil
}

// hasHashTag reports whether Redis Cluster hashes only part of key: the
// text between the first '{' and the first '}' after it, when not empty.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}
